-- wrk script of examples/bench/compare.sh: the same scenarios as examples/loadgen, driven by
-- a load generator that is not ours. Configured by environment variables:
--   WRK_METHOD  GET (default) or POST
--   WRK_PATH    path and query, "{id}" and "{n}" replaced per request
--   WRK_BODY    request body (JSON), same replacements; none when unset
--   WRK_IDS     file of ids, one a line, taken in turn from a different start per thread
--   WRK_AUTH    value of the Authorization header
--   WRK_NAME    scenario name, WRK_OUT the JSON file the figures go to (loadgen's members)
-- The latencies `done` gets are after wrk's correction for coordinated omission (its
-- `stats_correct`): at one connection, one 40 ms stall among 0.4 ms creates adds about a
-- hundred samples between them, so the mean can exceed the run's time over its requests.
local method = os.getenv("WRK_METHOD") or "GET"
local path_t = os.getenv("WRK_PATH") or "/"
local body_t = os.getenv("WRK_BODY")
local ids_file = os.getenv("WRK_IDS")
local auth = os.getenv("WRK_AUTH")

local ids = {}
local counter = 0
local next_tid = 0

function setup(thread)
  next_tid = next_tid + 1
  thread:set("tid", next_tid)
end

function init(args)
  if ids_file and ids_file ~= "" then
    for line in io.lines(ids_file) do
      if line ~= "" then ids[#ids + 1] = line end
    end
  end
end

local function fill(t, n, id)
  -- A function as replacement: ids and bodies are taken literally, never as patterns.
  return (t:gsub("{n}", function() return n end):gsub("{id}", function() return id end))
end

function request()
  counter = counter + 1
  -- Unique across threads, so created names and emails never repeat.
  local n = tostring(tid * 1000000000 + counter)
  local id = ""
  if #ids > 0 then id = ids[(counter + tid * 7919) % #ids + 1] end
  local headers = {}
  if auth and auth ~= "" then headers["Authorization"] = auth end
  local body = nil
  if body_t and body_t ~= "" then
    body = fill(body_t, n, id)
    headers["Content-Type"] = "application/json"
  end
  return wrk.format(method, fill(path_t, n, id), headers, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.status + e.timeout
  local secs = summary.duration / 1e6
  local f = assert(io.open(os.getenv("WRK_OUT"), "w"))
  f:write(string.format(
    '{"name": "%s", "tool": "wrk", "requests": %d, "errors": %d, "duration_secs": %.3f, ' ..
    '"rps": %.1f, "mean_ms": %.4f, "p50_ms": %.4f, "p99_ms": %.4f, "max_ms": %.4f}\n',
    os.getenv("WRK_NAME") or "", summary.requests, errors, secs, summary.requests / secs,
    latency.mean / 1000, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000))
  f:close()
end
