-- wrk script for bench/run. Configured by environment variables:
--
--   BENCH_METHOD   GET (default) or POST
--   BENCH_AUTH     value of the Authorization header
--   BENCH_COOKIE   value of the Cookie header
--   BENCH_BODY     one fixed form body (the request stays static: wrk builds it once)
--   BENCH_BODIES   a file of form bodies, one per line, each sent once: thread k of n takes
--                  lines k, k+n, k+2n, ... and stops when its share runs out, so single-use
--                  values (codes, refresh tokens, assertions) are never replayed
--   BENCH_THREADS  wrk's -t (needed to split BENCH_BODIES)
--   BENCH_CAPTURE1, BENCH_CAPTURE2  "field|prefix|suffix|file": from every 2xx JSON response
--                  (BENCH_BODIES only) append prefix..value..suffix of the string field to
--                  file.<thread>, one per line (the refresh tokens an exchange issues feed the
--                  refresh scenario, its access tokens the revocation scenario)
--   BENCH_RATE     pace the whole run at this many requests/s (each thread keeps its share on a
--                  schedule; when the server falls behind, requests go out as fast as they can)
--
-- done() prints one line for bench/run: "BENCH ok=N bad=N active=SECONDS exhausted=0|1",
-- where ok/bad count 2xx-3xx and other responses (only with BENCH_BODIES, which needs
-- response()), and active is the time until the bodies ran out (the run time otherwise).

local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
  int clock_gettime(int clk_id, bench_timespec *tp);
]]
local ts = ffi.new("bench_timespec")
local function now()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

-- An empty variable counts as unset.
local function env(name)
  local v = os.getenv(name)
  if v == "" then return nil end
  return v
end

local method = env("BENCH_METHOD") or "GET"
local bodies_file = env("BENCH_BODIES")
local nthreads = tonumber(env("BENCH_THREADS") or "1")
local rate = tonumber(env("BENCH_RATE") or "")

local headers = {}
if env("BENCH_AUTH") then headers["Authorization"] = env("BENCH_AUTH") end
if env("BENCH_COOKIE") then headers["Cookie"] = env("BENCH_COOKIE") end
if method == "POST" then headers["Content-Type"] = "application/x-www-form-urlencoded" end

wrk.method = method
wrk.headers = headers
if env("BENCH_BODY") then wrk.body = env("BENCH_BODY") end

-- Main state: one entry per thread, for done().
local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

-- Thread state.
ok, bad, started, finished = 0, 0, 0, 0

if bodies_file then
  local lines, pos = {}, 1

  local captures = {}

  function init(args)
    for _, name in ipairs({ "BENCH_CAPTURE1", "BENCH_CAPTURE2" }) do
      local spec = env(name)
      if spec then
        local field, prefix, suffix, file = spec:match("^([^|]*)|([^|]*)|([^|]*)|(.*)$")
        captures[#captures + 1] = {
          pattern = '"' .. field .. '":"([^"]+)"', prefix = prefix, suffix = suffix,
          out = assert(io.open(file .. "." .. tid, "a")),
        }
      end
    end
    local i = 0
    for line in io.lines(bodies_file) do
      if line ~= "" then
        if i % nthreads == tid then lines[#lines + 1] = line end
        i = i + 1
      end
    end
  end

  function request()
    if started == 0 then started = now() end
    if pos > #lines then
      -- This thread's share is used up: stop it rather than replay a single-use value.
      if finished == 0 then finished = now() end
      wrk.thread:stop()
      return ""
    end
    local body = lines[pos]
    pos = pos + 1
    return wrk.format(method, nil, headers, body)
  end

  function response(status, hdrs, body)
    if finished ~= 0 then return end
    if status < 400 then ok = ok + 1 else bad = bad + 1 end
    if status == 200 then
      for _, c in ipairs(captures) do
        local v = body:match(c.pattern)
        if v then c.out:write(c.prefix, v, c.suffix, "\n") end
      end
    end
  end
end

if rate then
  local interval = nthreads / rate
  local next_at = 0
  function delay()
    local t = now()
    if next_at < t then next_at = t end
    local slot = next_at
    next_at = next_at + interval
    return (slot - t) * 1000
  end
end

function done(summary, latency, requests)
  local o, b, exhausted, first, last = 0, 0, 0, nil, 0
  for _, t in ipairs(threads) do
    o = o + (t:get("ok") or 0)
    b = b + (t:get("bad") or 0)
    local s, f = t:get("started") or 0, t:get("finished") or 0
    if s > 0 and (first == nil or s < first) then first = s end
    if f > 0 then
      exhausted = exhausted + 1
      if f > last then last = f end
    end
  end
  local active = summary.duration / 1e6
  -- Every thread ran out: the rate is over the time until the last one did.
  if exhausted == #threads and first then active = last - first end
  io.write(string.format("BENCH ok=%d bad=%d active=%.3f exhausted=%d\n", o, b, active,
    exhausted > 0 and 1 or 0))
end
