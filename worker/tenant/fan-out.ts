// Calls to many objects with a bound on how many are in flight (a revoke reaching every live
// session of a tenant, a tenant's delete ending them all).

/**
 * `call` for each item, at most `limit` at once; answers each result in order, undefined where
 * it failed (a failure does not stop the others, and is the caller's to log or not).
 */
export async function eachAtMost<T, R>(items: readonly T[], limit: number, call: (item: T) => Promise<R>): Promise<(R | undefined)[]> {
  const results: (R | undefined)[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      try {
        results[index] = await call(items[index]);
      } catch {
        results[index] = undefined;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
