// Split into text-stripper.ts, expect-matcher.ts and shell-marks.ts (next commit).
export * from "./text-stripper.js";
