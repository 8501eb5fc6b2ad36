// Deadline-bound waits for the end-to-end tests: poll a check until it holds, or fail saying
// what was awaited. (Clients wait on their own events: TermClient.waitFor, EventStreamClient.waitFor.)

/** Resolves when `check` returns a value other than undefined/false; polls with a deadline. */
export async function until<T>(check: () => T | Promise<T>, deadlineMs: number, what: string): Promise<NonNullable<T>> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false && value !== null) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
