// Which console method each level is written with (a pure-logic test: the console is watched, not
// replaced in behaviour). Errors alone go through console.error: under wrangler it prints
// `✘ [ERROR]`, so a warning must not use it; warnings go through console.warn (stderr in Node, so a
// runner's warnings and errors stay on stderr). The real edge's output is checked in
// test/cors.test.ts.
import { afterEach, describe, expect, it, vi } from "vitest";
import { log, setLogLevel } from "./log.js";

/** Every line written through each console method while `fn` runs. */
function written(fn: () => void): Record<"log" | "warn" | "error", string[]> {
  const seen = { log: [] as string[], warn: [] as string[], error: [] as string[] };
  const spies = (["log", "warn", "error"] as const).map((method) =>
    vi.spyOn(console, method).mockImplementation((line: unknown) => void seen[method].push(String(line))),
  );
  try {
    fn();
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
  return seen;
}

afterEach(() => setLogLevel("info"));

describe("log", () => {
  it("writes debug and info with console.log, warnings with console.warn, errors alone with console.error", () => {
    const seen = written(() => {
      setLogLevel("debug");
      log.debug("a.debug", { n: 1 });
      log.info("a.info", { n: 2 });
      log.warn("a.warn", { n: 3, outcome: "odd" });
      log.error("a.error", { error: new Error("boom") });
    });
    expect(seen).toEqual({
      log: ['{"level":"debug","event":"a.debug","n":1}', '{"level":"info","event":"a.info","n":2}'],
      warn: ['{"level":"warn","event":"a.warn","n":3,"outcome":"odd"}'],
      error: ['{"level":"error","event":"a.error","error":"boom"}'],
    });
  });

  it("drops what is below the level set, and ignores a level it does not know", () => {
    const seen = written(() => {
      setLogLevel("warn");
      log.info("dropped");
      log.warn("kept.warn");
      setLogLevel("loud");
      log.info("still.dropped");
      log.error("kept.error");
    });
    expect(seen).toEqual({ log: [], warn: ['{"level":"warn","event":"kept.warn"}'], error: ['{"level":"error","event":"kept.error"}'] });
  });
});
