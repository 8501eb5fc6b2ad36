// The process is paused while any reason holds, and resumed only when the last one goes.
import { describe, expect, it } from "vitest";
import { PauseReasons } from "./pause-reasons.js";

describe("PauseReasons", () => {
  it("pauses once, and resumes only when no reason is left", () => {
    const calls: string[] = [];
    const reasons = new PauseReasons<"delivery" | "screen">({ pause: () => calls.push("pause"), resume: () => calls.push("resume") });
    reasons.pause("delivery");
    reasons.pause("screen");
    reasons.pause("delivery");
    expect(calls).toEqual(["pause"]);
    reasons.resume("delivery");
    expect(calls).toEqual(["pause"]);
    expect(reasons.paused).toBe(true);
    reasons.resume("delivery");
    reasons.resume("screen");
    expect(calls).toEqual(["pause", "resume"]);
    reasons.resume("screen");
    expect(calls).toEqual(["pause", "resume"]);
  });

  it("lets a resume that pauses again (held bytes flushed) leave the process paused", () => {
    const calls: string[] = [];
    const reasons: PauseReasons<"delivery" | "screen"> = new PauseReasons({
      pause: () => calls.push("pause"),
      resume: () => {
        calls.push("resume");
        reasons.pause("delivery"); // the bytes it let out filled the window again
      },
    });
    reasons.pause("screen");
    reasons.resume("screen");
    expect(calls).toEqual(["pause", "resume", "pause"]);
    expect(reasons.paused).toBe(true);
  });
});
