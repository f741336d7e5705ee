package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"iter"
	"net/http"
	"net/netip"
	"net/textproto"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// Identity prefixes: every storage identity the HTTP layer builds is one of
//
//	k:<64 hex>             an API key, by the SHA-256 of the header value
//	ip:<IPv4>              an IPv4 client
//	ip:<IPv6 prefix>/<n>   an IPv6 client, grouped by ipv6_prefix
//	ip:unknown             a client whose address cannot be read
//
// so an identity is at most 3+43 bytes ("ip:" and a masked IPv6 prefix)
// or 66 bytes, whatever the client sends.
const (
	keyPrefix  = "k:"
	ipPrefix   = "ip:"
	unknownIP  = "ip:unknown"
	redactKeep = 12 // hex digits of a key hash that logs keep
)

// apiKey finds the first configured key header present and writes the
// SHA-256 of its whole value, as hashKey counts it (for Authorization,
// "Bearer abc" is "bearer abc"), into sum. An empty value
// is no key, and so is a credential of one request (signature). White space around
// a value is not the key's: every platform drops HTTP's before the handler
// runs (the Lambda's adapter since 925519a; counted with it, " k" was a
// fresh client while the origin served k), and apiKey drops it too, for a
// request handed to the Handler in process, with what an origin may trim
// besides (trimKey: Unicode's white space, U+FEFF, a lone byte 0x85 or
// 0xA0). Several
// lines of the header are one value, joined with ",": the value API
// Gateway gives the Lambda for the same request, so that a client is one
// identity whichever front end counts it (reading only the first line,
// "a" then "b" was the client "a" here and "a,b" there). A header the
// request's Connection field names is no key: the proxy drops it.
func (h *Handler) apiKey(r *http.Request, sum *[sha256.Size]byte) bool {
	conn := r.Header["Connection"]
	for _, name := range h.keyHeaders {
		if len(conn) > 0 && listed(conn, name) {
			// A proxy drops it as hop-by-hop: the origin never sees it,
			// and a made-up key there would be counted while the origin
			// serves the key in the next header.
			continue
		}
		vs := r.Header[name]
		if len(vs) == 0 {
			continue
		}
		v := vs[0]
		if len(vs) > 1 {
			// Joined before signature reads it, as the Worker and API
			// Gateway join the lines: two lines of one request's
			// credential were a key here, one line there.
			v = strings.Join(vs, ",")
		}
		if v = trimKey(v); v != "" && !signature(v) {
			hashKey(v, sum)
			return true
		}
	}
	return false
}

// signature reports whether v is a credential made for one request, which
// is no key: a signature over the request and the time, or a nonce. Each
// scheme is one whose value the client makes anew for each request:
//
//   - AWS's SigV4 and SigV4a ("AWS4-HMAC-SHA256", "AWS4-ECDSA-P256-SHA256")
//     and S3's SigV2 ("AWS <id>:<signature>", over the Date), which
//     S3-compatible stores still take;
//   - Google Cloud Storage's V4 signatures ("GOOG4-HMAC-SHA256",
//     "GOOG4-RSA-SHA256"), over x-goog-date;
//   - Azure Storage's Shared Key ("SharedKey <account>:<signature>", or
//     "SharedKeyLite"), over x-ms-date or Date;
//   - Hawk's (a MAC over a timestamp and the client's nonce) and the
//     scheme "Signature" of the Cavage drafts (HTTP Signatures: over
//     (created), by default, or Date, and the request target);
//   - Digest credentials (RFC 7616: a response over the method, URI, nonce
//     count and client nonce), and OAuth 1.0's (RFC 5849), which carry a
//     nonce, a timestamp and a signature.
//
// A Function URL behind CloudFront's origin access control gets
// CloudFront's SigV4 on every request, and counted as a key each anonymous
// request was a fresh client; so was each request of a client that signs,
// never limited, and an entry of the store each. An OAuth value without
// oauth_nonce (an OAuth 2 token under that scheme, OAuth 1.0's PLAINTEXT)
// is the same on each request, and a key.
//
// It runs for every request with a key: a Bearer token or a key whose
// first letter begins none of the schemes is turned away by its first
// byte.
func signature(v string) bool {
	if len(v) < 5 {
		return false // "AWS a" is the shortest
	}
	switch v[0] | 0x20 { // the first letter in lower case
	case 'a':
		return hasScheme(v, "AWS") || hasScheme(v, "AWS4-HMAC-SHA256") || hasScheme(v, "AWS4-ECDSA-P256-SHA256")
	case 'd':
		return hasScheme(v, "Digest")
	case 'g':
		return hasScheme(v, "GOOG4-HMAC-SHA256") || hasScheme(v, "GOOG4-RSA-SHA256")
	case 'h':
		return hasScheme(v, "Hawk")
	case 'o':
		return hasScheme(v, "OAuth") && strings.Contains(v[6:], "oauth_nonce")
	case 's':
		return hasScheme(v, "Signature") || hasScheme(v, "SharedKey") || hasScheme(v, "SharedKeyLite")
	}
	return false
}

// hasScheme reports whether v begins with the auth-scheme s, in any case
// (RFC 9110 11.1), followed by a space or a tab.
func hasScheme(v, s string) bool {
	return len(v) > len(s) && (v[len(s)] == ' ' || v[len(s)] == '\t') && asciiEqualFold(v[:len(s)], s)
}

// hashKey writes the SHA-256 of key to sum. A key with commas is
// hashed as its comma-separated elements trimmed of the white space
// around them (RFC 9110 5.6.1's OWS) and joined with ",": a key sent on two
// lines, k1 and k2, is "k1,k2" to the local server, "k1,k2" to the Lambda
// (API Gateway joins lines with ",") and "k1, k2" to a Worker (JavaScript
// joins them with ", "), and must be one client on all three.
//
// A key of the form "<scheme> <credentials>" (Authorization's, RFC 9110
// 11.4) is hashed with its scheme in lower case and one space before the
// credentials: the scheme is case-insensitive and may be followed by
// several spaces, so "Bearer k", "bearer k" and "Bearer  k" are one
// credential to the origins that follow RFC 9110, and must be one client
// here, not one fresh quota per spelling.
//
// For the same reason the base64 of a Basic key's credentials (RFC 7617)
// is hashed with the bits of its last character that make no byte
// cleared, as base64 spells the bytes: decoders ignore them (Go's
// Request.BasicAuth, Python's, Node's), and counted as written each of
// the 16 spellings of a password whose base64 ends "==" was a fresh
// client that the origin served as the one whose key had used its quota.
// Only the last four characters are read and respelled, so that a
// client's base64 is one client with its spare bits' spellings alone,
// which every decoder reads as it. (A value with characters outside the
// alphabet, which decoders read apart, Python dropping "-" and "_" and
// Node reading them as "+" and "/", may be merged with others such: none
// of them is a client's base64.) Written here, not in a function of its
// own: that cost the Worker's bundle some 70 bytes more.
func hashKey(key string, sum *[sha256.Size]byte) {
	if strings.IndexByte(key, ',') >= 0 {
		key = joinElements(key)
	}
	var buf [128]byte
	b := withScheme(buf[:0], key) // "basic " once the scheme is lowered
	const basic = "basic "
	if len(b) >= len(basic)+4 && string(b[:len(basic)]) == basic {
		var raw [3]byte // the last quantum's bytes, if the base64 is whole
		if n, err := base64.StdEncoding.Decode(raw[:], b[len(b)-4:]); err == nil {
			b = append(buf[:0], b...) // b may be the key's own bytes
			base64.StdEncoding.Encode(b[len(b)-4:], raw[:n])
		}
	}
	// A JWT ("eyJ", the base64url of `{"`, begins its header), alone or
	// after a scheme: its signature is read as its bytes (jwsSig).
	b = jwsSig(b)
	*sum = sha256.Sum256(b)
}

// jwsSig returns key, with its last segment a JWT's signature if it is a
// JWT alone or after a scheme ("eyJ", the base64url of `{"`, begins its
// header), spelled as base64url spells its bytes. (Of a JWE that is the
// tag alone: its encrypted key, IV and ciphertext, which decoders read as
// bytes too, are hashed as written, so a JWE's other spellings are still
// other clients.) The JWT libraries verify the bytes, and decode them
// leniently. Go's (golang-jwt, by default) ignores the spare bits of the
// last character,
// and Python's (PyJWT) and Node's Buffer (jsonwebtoken's RS and ES
// algorithms) also read "+" and "/" as "-" and "_", skip characters
// outside the alphabet and stop at a "=" that ends a quantum: counted as
// written, a client whose token had used its quota sent it with one more
// "!!!!", or its spare bits set otherwise, and was a fresh client the
// origin served as the token. Node's Buffer also ignores a last
// character alone in its quantum (after a signature of 48, 96 or 132
// bytes, which jsonwebtoken lets through), so that character is dropped;
// and a JWT sent alone may have a space in its signature (withScheme
// leaves it as it is). A spelling a strict decoder refuses is
// counted with the token it spells, whose holder sent it. A token as its
// issuer spells it is spelled the same, so api_keys entries of tokens
// still match. The respelling is a copy, made for every JWT (1 to 10 KB
// a request): skipping it for a token its issuer spelled cost the
// Worker's bundle some 80 bytes more.
func jwsSig(key []byte) []byte {
	i, j := 0, 0 // where the last segment and the token begin
	for k, c := range key {
		switch {
		case c == '.':
			i = k + 1
		case c == ' ' && j == 0 && i == 0: // a space after a dot is a signature's
			j = k + 1
		}
	}
	if t := key[j:]; i < j+4 || len(t) < 3 || string(t[:3]) != "eyJ" {
		return key
	}
	b := key[:i:i]  // the respelling: appended to, a copy
	last := byte(0) // the value of its last character
	for _, c := range key[i:] {
		v := b64Values[c]
		if v == 128 && (len(b)-i)%4 >= 2 {
			break // the quantum is whole: the rest is not read
		}
		if v < 128 {
			last = v & 63
			b = append(b, b64url[last])
		}
	}
	switch r := uint(len(b)-i) % 4; r {
	case 1:
		b = b[:len(b)-1] // Node's Buffer ignores a character alone
	case 2, 3:
		b[len(b)-1] = b64url[last&^spare[r]&63]
	}
	return b
}

// b64Values holds the value of each character of base64url, that of "+"
// and "/" (base64's for "-" and "_") plus 64, 128 for "=", and 255 for
// any other byte.
const b64Values = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7e\xff\x3e\xff\x7f\x34\x35\x36\x37\x38\x39\x3a\x3b\x3c\x3d\xff\xff\xff\x80\xff\xff\xff\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\xff\xff\xff\xff\x3f\xff\x1a\x1b\x1c\x1d\x1e\x1f\x20\x21\x22\x23\x24\x25\x26\x27\x28\x29\x2a\x2b\x2c\x2d\x2e\x2f\x30\x31\x32\x33\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"

// spare holds the spare bits of the last character of base64 whose last
// quantum has as many characters as the index: 4 after 2 characters, 2
// after 3 (and every bit after 1, which no base64 ends with).
const spare = "\x00\x3f\x0f\x03"

// b64url is base64url's alphabet.
const b64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// hexSum writes sum in lower-case hex to out (2*sha256.Size bytes). Not
// inlined: its callers are inlined at several call sites, and a copy of
// its loop at each cost the Worker's bundle bytes.
//
//go:noinline
func hexSum(out []byte, sum *[sha256.Size]byte) {
	_ = out[2*len(sum)-1]
	for i, b := range sum {
		// A pair of digits at a time: hex.Encode, a digit at a time,
		// took some 650 instructions per request.
		binary.LittleEndian.PutUint16(out[2*i:], hexPairs[b])
	}
}

// hexPairs holds the two lower-case hex digits of each byte, the first in
// the low byte.
var hexPairs = func() (t [256]uint16) {
	const digits = "0123456789abcdef"
	for b := range t {
		t[b] = uint16(digits[b>>4]) | uint16(digits[b&0xf])<<8
	}
	return t
}()

// withScheme returns key's bytes with the scheme of a "<scheme>
// <credentials>" key in lower case (ASCII) and the white space after it
// (sepLen: spaces, tabs, and what an origin may take for white space
// beyond ASCII, keySpace's; not a newline, vertical tab, form feed or
// carriage return) as one space, built in dst when that changes anything.
// Only the first such run separates; the rest of key stays as it is.
// Otherwise it
// returns key's bytes where they are: Sum256 neither keeps nor changes
// its argument, and []byte(key) copied every key longer than 32 bytes,
// an allocation per request for a typical key and 100 KB for a 100 KB
// one. Separated by spaces and tabs alone, "Bearer \xa0<token>" was a
// fresh client that werkzeug (credentials stripped as Latin-1) served as
// the token, and "Bearer\u3000<token>" one that a Go origin splitting
// with strings.Fields did.
func withScheme(dst []byte, key string) []byte {
	as := unsafe.Slice(unsafe.StringData(key), len(key))
	// One pass to the first space, tab or byte that is not ASCII.
	i := 0
	for i < len(key) && key[i] != ' ' && key[i] != '\t' && key[i] < utf8.RuneSelf {
		i++
	}
	if i < len(key) && key[i] >= utf8.RuneSelf {
		// A Unicode separator may come first: step by character, so
		// that the 0xA0 byte of an à is no space.
		for i < len(key) && sepLen(key[i:]) == 0 {
			if key[i] < utf8.RuneSelf {
				i++
			} else {
				_, n := utf8.DecodeRuneInString(key[i:])
				i += n
			}
		}
	}
	if i == 0 || i == len(key) {
		return as
	}
	j := i
	for n := sepLen(key[j:]); n > 0; n = sepLen(key[j:]) {
		j += n
	}
	lower := j == i+1 && key[i] == ' '
	for k := 0; k < i && lower; k++ {
		lower = key[k] < 'A' || key[k] > 'Z'
	}
	// A JWT alone, its dots before the space, has no scheme: lowered, it
	// was a fresh client for each thing after a space in its signature,
	// which PyJWT and Node's Buffer skip (jwsSig).
	if lower || j == len(key) || strings.HasPrefix(key, "eyJ") && uint(strings.LastIndexByte(key, '.'))-1 < uint(i)-1 {
		return as
	}
	for k := range i {
		c := key[k]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return append(append(dst, ' '), key[j:]...)
}

// joinElements returns the comma-separated elements of v, each trimmed of
// spaces and tabs, joined with ",".
func joinElements(v string) string {
	b := make([]byte, 0, len(v))
	for {
		e, rest, more := strings.Cut(v, ",")
		b = append(b, strings.Trim(e, " \t")...)
		if !more {
			return string(b)
		}
		b, v = append(b, ','), rest
	}
}

// HashKey returns the lower-case hex SHA-256 of an API key as it is
// counted (hashKey: a scheme in lower case and the white space after it
// one space, commas' white space dropped): what config.Config.APIKeys is
// keyed by and what `slidegate hash-key` prints. It hashes key as it is:
// the white space around a key that the pre-filter and the check API
// drop first is TrimKey's to drop.
func HashKey(key string) string {
	var sum [sha256.Size]byte
	hashKey(key, &sum)
	var out [2 * sha256.Size]byte
	hexSum(out[:], &sum)
	return string(out[:])
}

// keyIdentity is the storage identity of the key whose SHA-256 is sum:
// "k:" and the hex of sum.
func keyIdentity(sum *[sha256.Size]byte) string {
	var hex [2 * sha256.Size]byte
	hexSum(hex[:], sum)
	return keyPrefix + string(hex[:])
}

// redact shortens an identity for logs: a key identity keeps the first
// hex digits of its hash; IP identities are kept. Not inlined, for the
// Worker's bundle (Logged).
//
//go:noinline
func redact(id string) string {
	if strings.HasPrefix(id, keyPrefix) && len(id) > len(keyPrefix)+redactKeep {
		return id[:len(keyPrefix)+redactKeep] + "…"
	}
	return id
}

// ipIdentity returns the storage identity of a client address: IPv4 as
// is, IPv6 masked to its first bits (one host or household usually holds
// a whole /64, so a finer identity would let it multiply its quota).
func ipIdentity(a netip.Addr, v6bits int) string {
	var buf [64]byte
	switch {
	case !a.IsValid():
		return unknownIP
	case a.Is4():
		return string(a.AppendTo(append(buf[:0], ipPrefix...)))
	}
	p, err := a.Prefix(v6bits)
	if err != nil {
		return unknownIP
	}
	b, _ := p.AppendText(append(buf[:0], ipPrefix...))
	return string(b)
}

// clientAddr returns the client's address: the platform's (ClientIP)
// when it vouches for one; otherwise the peer, which is the address the
// platform saw connect (PeerIP) or the socket peer, unless the peer is a
// trusted proxy, in which case the right-most X-Forwarded-For address that
// is not itself a trusted proxy. Addresses left of it are the client's to
// forge and are never read. (A Lambda behind CloudFront sees CloudFront
// as its sourceIp: listed in trusted_proxies, it is not the client of
// everyone it forwards.)
func (h *Handler) clientAddr(r *http.Request) (netip.Addr, bool) {
	if h.clientIP != nil {
		if a, ok := h.clientIP(r); ok && a.IsValid() {
			return a.Unmap().WithZone(""), true
		}
	}
	var peer netip.Addr
	ok := false
	if h.peerIP != nil {
		if a, found := h.peerIP(r); found && a.IsValid() {
			peer, ok = a.Unmap().WithZone(""), true
		}
	}
	if !ok {
		if peer, ok = parseAddr(r.RemoteAddr); !ok {
			return netip.Addr{}, false
		}
	}
	return h.behind(peer, r), true
}

// behind returns the client of a request from peer: peer itself, unless
// it is a trusted proxy (see clientAddr).
func (h *Handler) behind(peer netip.Addr, r *http.Request) netip.Addr {
	if !h.trusted(peer) {
		return peer
	}
	client := peer
	for entry := range hops(r.Header["X-Forwarded-For"]) {
		a, ok := parseAddr(entry)
		if !ok {
			// A hop we cannot read: the last address we could trust
			// is the best we know.
			return client
		}
		client = a
		if !h.trusted(a) {
			return a
		}
	}
	// Every hop is a trusted proxy: the request started inside.
	return client
}

// hops yields the elements of the X-Forwarded-For field lines vs from the
// right, trimmed. Empty elements are skipped, as RFC 9110 section 5.6.1.2
// says to: a trailing comma must not make the proxy the client.
func hops(vs []string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := len(vs) - 1; i >= 0; i-- {
			list := vs[i]
			for list != "" {
				entry := list
				if j := strings.LastIndexByte(list, ','); j >= 0 {
					entry, list = list[j+1:], list[:j]
				} else {
					list = ""
				}
				if entry = strings.TrimSpace(entry); entry != "" && !yield(entry) {
					return
				}
			}
		}
	}
}

func (h *Handler) trusted(a netip.Addr) bool { return contains(h.proxies, a) }

// contains reports whether one of ps contains a.
func contains(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParseAddr parses a client's address as a platform may give it, with or
// without a port (parseAddr): the Lambda's requestContext.http.sourceIp.
func ParseAddr(s string) (netip.Addr, bool) { return parseAddr(s) }

// parseAddr parses "1.2.3.4", "1.2.3.4:5", "2001:db8::1", "[2001:db8::1]"
// and "[2001:db8::1]:5", and drops zones and IPv4-mapping. It picks the one
// parser that fits instead of trying them in turn: a failed parse
// allocates its error, on every request.
func parseAddr(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	var a netip.Addr
	var err error
	switch {
	case s[0] == '[' && s[len(s)-1] == ']':
		a, err = netip.ParseAddr(s[1 : len(s)-1])
	case s[0] == '[' || strings.Count(s, ":") == 1:
		var ap netip.AddrPort
		ap, err = netip.ParseAddrPort(s)
		a = ap.Addr()
	default:
		a, err = netip.ParseAddr(s)
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// listed reports whether the Connection field values conn name the header
// name, a canonical token (RFC 9110 7.6.1: comma-separated, any case), as
// the proxy reads them before dropping what they name: each element
// trimmed of ASCII white space only (textproto.TrimString), and matched in
// ASCII case only (http.Header.Del canonicalizes it). strings.TrimSpace
// and strings.EqualFold also trim U+00A0 and U+0085 and fold the Kelvin
// sign into k: a key header the proxy passed on was no key here.
func listed(conn []string, name string) bool {
	for _, v := range conn {
		for t := range strings.SplitSeq(v, ",") {
			if asciiEqualFold(textproto.TrimString(t), name) {
				return true
			}
		}
	}
	return false
}

// asciiEqualFold reports whether a and b are equal but for the case of
// ASCII letters.
func asciiEqualFold(a, b string) bool { return equalBy(a, b, upperASCII) }

func upperASCII(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// forOrigin drops from hd, a request's header about to go to the origin,
// what an origin that reads headers CGI-style (WSGI, Rack, PHP: every
// name upper-cased, "-" read as "_") would take for a key header the
// pre-filter did not read: a name with an underscore (X_API_KEY is
// X-API-Key there: a client whose key had used its quota sent it so, was
// counted as an anonymous IP, and was served as the key; X_Real_IP a
// forged X-Real-IP), unless it is a configured key header itself, and
// any other spelling of a configured key header (Api-Key, for a
// configured api_key). nginx drops names with an underscore by default.
// Key headers go on as the pre-filter read them (keyLine).
func (h *Handler) forOrigin(hd http.Header) {
	for k, vs := range hd {
		if slices.Contains(h.keyHeaders, k) {
			keyLine(hd, k, vs)
			continue
		}
		drop := strings.IndexByte(k, '_') >= 0
		for _, kh := range h.keyHeaders {
			drop = drop || cgiEqual(k, kh)
		}
		if drop {
			delete(hd, k)
		}
	}
}

// cgiEqual reports whether header names a and b are one name to a CGI-style
// origin: equal but for ASCII case and "-" against "_".
func cgiEqual(a, b string) bool { return equalBy(a, b, cgiByte) }

func cgiByte(c byte) byte {
	if c == '-' {
		return '_'
	}
	return upperASCII(c)
}

// equalBy reports whether a and b are equal byte for byte once each byte
// is mapped by f.
func equalBy(a, b string, f func(byte) byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if f(a[i]) != f(b[i]) {
			return false
		}
	}
	return true
}

// trimKey returns a key header's value without what an origin may take for
// white space around the key: HTTP's spaces and tabs, Unicode's white
// space (strings.TrimSpace's, Python's str.strip's), U+FEFF (a byte order
// mark, which JavaScript's trim takes for white space: a Worker origin,
// which reads values as UTF-8, served "<key>\ufeff" as the key, and a key
// file saved with a mark gave hash-key a dead entry), and a byte 0x85 or
// 0xA0 that is no part of a UTF-8 character, which an origin reading the
// value as Latin-1 (gunicorn before 22, Node) takes for NEL or NBSP.
// Trimmed by HTTP's rules alone, "<used-up pro key>\xa0" was a fresh
// identity of the default plan that gunicorn (which strips every value
// so) or a Go origin calling strings.TrimSpace on "\u00a0" served as the
// pro key. The key goes on to the origin trimmed as well (keyLine), so
// that an origin that trims less reads what was counted.
func trimKey(v string) string {
	if v == "" || v[0] > ' ' && v[0] < utf8.RuneSelf && v[len(v)-1] > ' ' && v[len(v)-1] < utf8.RuneSelf {
		return v // the common key: no allocation, no decoding
	}
	for n := spaceLen(v); n > 0; n = spaceLen(v) {
		v = v[n:]
	}
	for v != "" {
		r, n := utf8.DecodeLastRuneInString(v)
		if !keySpace(r, n, v[len(v)-1]) {
			break
		}
		v = v[:len(v)-n]
	}
	return v
}

// sepLen is spaceLen for the separator after a scheme: of ASCII, only a
// space or a tab (no header carries another; the check API's "a\nb",
// which hash-key warns of, stays what it was).
func sepLen(s string) int {
	if s != "" && s[0] < utf8.RuneSelf && s[0] != ' ' && s[0] != '\t' {
		return 0
	}
	return spaceLen(s)
}

// spaceLen returns the length of the white space character (keySpace) s
// begins with; 0 when it begins with none.
func spaceLen(s string) int {
	switch {
	case s == "":
		return 0
	case s[0] < utf8.RuneSelf:
		if unicode.IsSpace(rune(s[0])) {
			return 1
		}
		return 0
	}
	r, n := utf8.DecodeRuneInString(s)
	if keySpace(r, n, s[0]) {
		return n
	}
	return 0
}

// TrimKey returns an API key without the white space around it that the
// pre-filter and the check API drop before they hash it (HTTP's spaces
// and tabs, Unicode's white space, U+FEFF, a lone byte 0x85 or 0xA0): what
// `slidegate hash-key` must hash for its api_keys entry to match.
func TrimKey(key string) string { return trimKey(key) }

// keySpace reports whether the rune r, n bytes of a key header's value
// starting or ending with the byte b, is white space to some origin.
func keySpace(r rune, n int, b byte) bool {
	if r == utf8.RuneError && n == 1 {
		return b == 0x85 || b == 0xa0
	}
	return unicode.IsSpace(r) || r == '\ufeff'
}
