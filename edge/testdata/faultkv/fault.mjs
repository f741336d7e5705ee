// A test Worker in front of slidegate's (build/worker.mjs): it hands the
// Worker a KV binding that fails, stalls or lists forged keys on demand, and
// records every put, so that the workerd tests can drive the real binding
// code (kvstore/workerskv's Binding) through KV faults. Tests only.
//
//   POST /__fault {"list": mode, "put": mode, "match": prefix, "delay": ms, "inject": {...}, "reset": true}
//     list: "ok" | "throw" (a synchronous exception) | "reject" | "slow" (delay ms, then the real list)
//       | "hold" (the real list once a control request releases it), for
//       the prefixes that start with listMatch ("": every prefix)
//     put:  "ok" | "throw" | "reject" | "reject-once" (the next put rejects, then "ok"),
//       for the keys that start with match ("": every key)
//     inject: {"bucket": "123", "keys": [metadata, ...]}: keys added to every
//       list of a prefix of that bucket, one per element, with that element
//       as their metadata ("none": no metadata property; "nan": {n: NaN})
//     release: let the held lists go on
//     reset: forget the recorded puts
//     now: the time (Unix ms) the isolate's clock reads from then on, Go's
//       time.Now (new Date) included; null: the real clock
//   GET /__fault: {"puts": [{key, ttl, n, at, ok, err}], "lists": n, "held": n}
//   X-Fault-Config: name  serves the request with SLIDEGATE_CONFIG_NAME
import worker from "./build/worker.mjs";

const state = { list: "ok", listMatch: "", put: "ok", match: "", delay: 0, inject: null, now: null, puts: [], lists: 0, held: [] };

// The isolate's clock, set by "now": Go's wasm_exec reads the wall clock
// as (new Date).getTime().
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...a) {
    super(...(a.length === 0 && state.now !== null ? [state.now] : a));
  }
  static now() {
    return state.now !== null ? state.now : RealDate.now();
  }
};

function forged(res, prefix) {
  const inj = state.inject;
  if (!inj || !prefix.endsWith(":" + inj.bucket + ":")) {
    return res;
  }
  const keys = res.keys.slice();
  inj.keys.forEach((md, i) => {
    const k = { name: prefix + "forged" + i };
    if (md === "nan") {
      k.metadata = { n: NaN };
    } else if (md !== "none") {
      k.metadata = md;
    }
    keys.push(k);
  });
  return { ...res, keys };
}

function faulty(kv) {
  return {
    get: (...a) => kv.get(...a),
    getWithMetadata: (...a) => kv.getWithMetadata(...a),
    list(opts) {
      state.lists++;
      switch (opts.prefix.startsWith(state.listMatch) ? state.list : "ok") {
        case "throw":
          throw new Error("fault: list throws");
        case "reject":
          return Promise.reject(new Error("fault: list rejects"));
        case "hold":
          return new Promise((r) => state.held.push(r)).then(() => kv.list(opts)).then((res) => forged(res, opts.prefix));
        case "slow":
          return new Promise((r) => setTimeout(r, state.delay)).then(() => kv.list(opts)).then((res) => forged(res, opts.prefix));
      }
      return kv.list(opts).then((res) => forged(res, opts.prefix));
    },
    put(key, value, opts) {
      const rec = { key, ttl: opts?.expirationTtl, n: opts?.metadata?.n, at: Date.now(), ok: false, err: "" };
      state.puts.push(rec);
      const mode = key.startsWith(state.match) ? state.put : "ok";
      if (mode === "reject-once") {
        state.put = "ok";
      }
      switch (mode) {
        case "throw":
          rec.err = "fault: put throws";
          throw new Error(rec.err);
        case "reject":
        case "reject-once":
          rec.err = "fault: put rejects";
          return Promise.reject(new Error(rec.err));
      }
      return kv.put(key, value, opts).then(
        () => {
          rec.ok = true;
        },
        (e) => {
          rec.err = String(e);
          throw e;
        },
      );
    },
  };
}

export default {
  async fetch(req, env, ctx) {
    const url = new URL(req.url);
    if (url.pathname === "/__fault") {
      if (req.method === "POST") {
        const c = await req.json();
        for (const k of ["list", "listMatch", "put", "match", "delay", "inject", "now"]) {
          if (k in c) {
            state[k] = c[k];
          }
        }
        if (c.release) {
          state.held.forEach((r) => r());
          state.held = [];
        }
        if (c.reset) {
          state.puts = [];
          state.lists = 0;
        }
      }
      return Response.json({ puts: state.puts, lists: state.lists, held: state.held.length });
    }
    const e = { ...env, SLIDEGATE_KV: faulty(env.SLIDEGATE_KV) };
    const alt = req.headers.get("X-Fault-Config");
    if (alt) {
      e.SLIDEGATE_CONFIG = env["SLIDEGATE_CONFIG_" + alt.toUpperCase()];
    }
    return worker.fetch(req, e, ctx);
  },
};
