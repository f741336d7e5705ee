-- wrk script for proxyload: rotate the X-API-Key header over the same 1000
-- keys the Go generator uses (bench-key-0 ... bench-key-999).
local i = 0
request = function()
  i = (i + 1) % 1000
  return wrk.format("GET", "/v1/items", { ["X-API-Key"] = "bench-key-" .. i })
end
