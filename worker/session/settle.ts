// A wait bounded in time, as the session object's parts wait: the create for the process to
// start (session-start.ts), callers for the session to end (session-end.ts), run's answer for
// its output to reach the edge (pty-session.ts).

/** Waits at most `ms` for `register` to be called with a resolver; clears its timer either way. */
export function settleWithin<T>(ms: number, onTimeout: T, register: (resolve: (value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve) => {
    const timer = setTimeout(() => resolve(onTimeout), ms);
    register((value) => {
      clearTimeout(timer);
      resolve(value);
    });
  });
}
