// What a PTY's raw output means to an agent, in three parts (each in its own file):
// - text-stripper.ts: TextStripper and stripTerminal, raw bytes → the text an agent reads;
// - expect-matcher.ts: ExpectMatcher, a pattern over a bounded window of that text;
// - shell-marks.ts: ShellMarkScanner, OSC 133 shell-integration marks in the raw bytes.
// This module re-exports all three, so `import … from "shared/terminal-text.js"` keeps working.
export { MAX_STRING_SEQUENCE_BYTES, type StrippedText, TextStripper, stripTerminal } from "./text-stripper.js";
export {
  EXPECT_WINDOW_CHARS,
  type ExpectMatch,
  ExpectMatcher,
  MAX_EXPECT_PATTERN_CHARS,
  escapeRegExp,
} from "./expect-matcher.js";
export { MAX_SHELL_MARK_BODY_BYTES, type ShellMark, ShellMarkScanner } from "./shell-marks.js";
