// What the test agents and clients of both SDK versions share (agent.mjs, agent03.mjs,
// client.mjs, client03.mjs): it imports no SDK, so it runs beside either version.

// The command line's `--name value` options.
export function option(name, fallback) {
  const args = process.argv.slice(2);
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : fallback;
}

// What an agent counts, answered by GET /_stats: requests by "METHOD path", the pushes
// its SDK's sender made, those that failed, those in flight and when the last one moved.
export const stats = { requests: {}, pushes: 0, pushFailures: 0, pushing: 0, lastPushAt: 0 };

// The SDK's push sender POSTs with the global fetch, and logs a failure without throwing:
// an agent fetches nothing else, so counting fetches counts pushes.
export function countPushes() {
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (...request) => {
    stats.pushes += 1;
    stats.pushing += 1;
    stats.lastPushAt = Date.now();
    try {
      const response = await realFetch(...request);
      if (!response.ok) stats.pushFailures += 1;
      return response;
    } catch (error) {
      stats.pushFailures += 1;
      throw error;
    } finally {
      stats.pushing -= 1;
      stats.lastPushAt = Date.now();
    }
  };
}

// Count every request of an Express app, and serve the counts at /_stats.
export function countRequests(server) {
  server.use((req, _res, next) => {
    const key = `${req.method} ${req.path}`;
    stats.requests[key] = (stats.requests[key] ?? 0) + 1;
    next();
  });
  server.get('/_stats', (_req, res) => res.json(stats));
}

// A fetch that puts the caller's bearer token on every request (a client's transports).
export function bearerFetch(token) {
  return (url, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set('Authorization', `Bearer ${token}`);
    return fetch(url, { ...init, headers });
  };
}

// The SDK's error for a call: whether it is the given class (each transport throws a
// subclass of it), and the subclass; null when the call succeeds.
export async function errorOf(call, expected) {
  try {
    await call();
    return null;
  } catch (error) {
    return { taskNotFound: error instanceof expected, name: error.constructor.name };
  }
}
