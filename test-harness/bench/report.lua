-- wrk script for the benchmark: sends the request given by the environment (BENCH_BODY or
-- BENCH_BODY_HEX, and BENCH_HEADERS as "Name: value" lines) as a POST, and prints one JSON line
-- when done.

wrk.method = "POST"
wrk.body = os.getenv("BENCH_BODY") or ""
-- A binary body (a gRPC frame) comes as hex: the environment cannot hold a NUL byte.
local hex = os.getenv("BENCH_BODY_HEX")
if hex then
  wrk.body = hex:gsub("%x%x", function(byte) return string.char(tonumber(byte, 16)) end)
end
for line in (os.getenv("BENCH_HEADERS") or ""):gmatch("[^\n]+") do
  local name, value = line:match("^([^:]+):%s*(.*)$")
  if name then
    wrk.headers[name] = value
  end
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    '{"requests":%d,"seconds":%.3f,"errors":%d,"non_2xx":%d,"p50_us":%d,"p99_us":%d}\n',
    summary.requests,
    summary.duration / 1e6,
    errors.connect + errors.read + errors.write + errors.timeout,
    errors.status,
    latency:percentile(50),
    latency:percentile(99)
  ))
end
