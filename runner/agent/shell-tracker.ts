// What a hosted session's shell is doing (docs/protocol.md §3, "Agents"), from the OSC 133
// marks in its output (shell-integration.ts puts them there for bash; any shell that prints
// them is understood):
//   A …prompt… B …command line, as typed and echoed… C …the command's output… D;<exit status>
// Fed every output byte in offset order, it feeds the session's screen too, cut at the marks, so
// that what it reads from the screen (the command line as it looks, at C) is the screen exactly
// at that mark. It reports each command that ends (C…D) and runs commands for `run`: typed at
// the prompt like a person would, answered with their exit code and clean output.
import { MAX_RUN_OUTPUT_BYTES } from "../../shared/agent.js";
import { MAX_COMMAND_TEXT, type RunnerLinkMessage } from "../../shared/protocol.js";
import { type ShellMark, ShellMarkScanner } from "../../shared/shell-marks.js";
import { TextStripper } from "../../shared/text-stripper.js";
import { utf8ByteLength } from "../../shared/utf8.js";
import type { ScreenPosition, TerminalScreen } from "./screen.js";

export type CommandReport = Omit<Extract<RunnerLinkMessage, { type: "command" }>, "type">;
export type RunAnswer = Extract<RunnerLinkMessage, { type: "run_result" }>["result"];
type FailureCode = Extract<RunnerLinkMessage, { type: "call_failed" }>["code"];
export type RunOutcome = { ok: true; result: RunAnswer } | { ok: false; code: FailureCode; message: string };

/** Commands kept to send again after a link's `resume`. */
export const RECENT_COMMANDS = 16;
/** Text kept after a prompt (the command line as echoed, for when the screen no longer shows it). */
const PROMPT_TEXT_CHARS = 64 * 1024;

const BUSY_MESSAGE = "the shell is not at its prompt (a command or program is running, or a line is being typed)";

const BRACKETED_PASTE_START = "\x1b[200~";
const BRACKETED_PASTE_END = "\x1b[201~";

export interface ShellTrackerPort {
  /** The session's screen: fed by the tracker, every byte, in order. */
  screen: TerminalScreen;
  /** Types into the session (through its input path and bound). */
  type(bytes: Uint8Array): void;
  /** A command ended (sent to the edge). */
  onCommand(report: CommandReport): void;
}

/** After B: the command line being typed. */
interface Prompt {
  /** The line's text as output (the echo), escapes removed: a fallback for the command's text. */
  stripper: TextStripper;
  text: string;
  /** Raw offset just after the echoed line's end (its first "\n"), or null before it. */
  lineEnd: number | null;
  /** Where the screen's cursor was at B (set once the screen has parsed up to B). */
  position: ScreenPosition | null;
  superseded: boolean;
}

/** After C: a command running. */
interface Command {
  from: number;
  startedAt: number;
  /** What was run; null until the screen has parsed up to C (a command typed by hand). */
  text: string | null;
  run: Run | null;
}

interface Run {
  command: string;
  /** Typed into the shell (at a prompt). */
  typed: boolean;
  answered: boolean;
  /** Its C's end once it has started; until then the output offset when it was asked for. */
  from: number;
  /** When its C came; until then when it was asked for. */
  startedAt: number;
  output: OutputText | null;
  timer: NodeJS.Timeout | undefined;
  answer: (outcome: RunOutcome) => void;
}

/** A command that has ended, waiting for its text (the screen) to be reported in order. */
interface Ended {
  command: Command;
  report: Omit<CommandReport, "command">;
}

export class ShellTracker {
  private readonly scanner: ShellMarkScanner;
  private integrated: boolean;
  private prompt: Prompt | null = null;
  private command: Command | null = null;
  /** A run waiting for its C (typed, or to be typed at the next prompt). */
  private pendingRun: Run | null = null;
  private readonly ended: Ended[] = [];
  private readonly recentReports: CommandReport[] = [];
  private exited = false;

  constructor(
    private readonly port: ShellTrackerPort,
    options: { integrated: boolean; offset?: number },
  ) {
    this.integrated = options.integrated;
    this.scanner = new ShellMarkScanner(options.offset ?? 0);
  }

  /** Raw offset up to which output has been fed. */
  get offset(): number {
    return this.scanner.offset;
  }

  /** The session is a shell with integration: started with it, or it has printed a mark. */
  get integration(): boolean {
    return this.integrated;
  }

  /** The shell shows its prompt and nothing has been typed at it (as far as its output says). */
  get atPrompt(): boolean {
    return this.prompt !== null && this.prompt.text.length === 0 && this.command === null;
  }

  /** The newest commands reported (at most RECENT_COMMANDS), oldest first. */
  recent(): readonly CommandReport[] {
    return this.recentReports;
  }

  /** The next output bytes, at `offset` (each push starts where the previous ended). */
  push(offset: number, bytes: Uint8Array): void {
    let at = offset;
    for (const mark of this.scanner.push(offset, bytes)) {
      // Up to the mark's end (a mark's own bytes are no text): then the mark takes effect, with
      // the screen parsed exactly up to it.
      this.output(offset, bytes, at, mark.end);
      at = mark.end;
      this.mark(mark);
    }
    this.output(offset, bytes, at, offset + bytes.byteLength);
  }

  /**
   * Types `command` and Enter at the shell's prompt and answers when it ends (D) or `timeoutMs`
   * passes (then `timedOut`, and the command goes on: its D still reports it). Between a command's
   * end and the next prompt (or before the first), it is typed once the prompt is there: runs one
   * after the other never find the shell busy.
   */
  run(command: string, timeoutMs: number): Promise<RunOutcome> {
    const refuse = (code: FailureCode, message: string) => Promise.resolve<RunOutcome>({ ok: false, code, message });
    if (this.exited) return refuse("SESSION_EXITED", "the session's process has exited");
    if (!this.integrated) return refuse("NO_SHELL_INTEGRATION", "the session's program is not a shell with integration");
    if (/[\r\n]/.test(command)) return refuse("INTERNAL", "a command to run must be one line");
    if (command.length === 0 || command.length > MAX_COMMAND_TEXT) return refuse("INTERNAL", "command: 1 to 16384 characters");
    const ready = this.atPrompt;
    const promptDue = this.prompt === null && this.command === null;
    // Something was typed at the prompt: the screen tells whether it still shows (or was erased, Ctrl+U).
    const prompt = this.prompt;
    const typedAt = !ready && !promptDue && this.command === null ? (prompt?.position ?? null) : null;
    if (this.pendingRun || (!ready && !promptDue && !typedAt)) return refuse("BUSY", BUSY_MESSAGE);
    return new Promise((answer) => {
      const now = Date.now();
      const run: Run = {
        command,
        typed: false,
        answered: false,
        from: this.offset,
        startedAt: now,
        output: null,
        timer: undefined,
        answer,
      };
      run.timer = setTimeout(() => this.timedOut(run), timeoutMs);
      this.pendingRun = run;
      if (ready) this.typeRun(run);
      else if (typedAt) {
        this.port.screen.afterParsed(() => {
          if (run.typed || run.answered) return; // a new prompt came first and took it
          if (this.prompt === prompt && this.command === null && this.port.screen.lineBlankSince(typedAt)) return this.typeRun(run);
          if (this.pendingRun === run) this.pendingRun = null;
          this.refuseRun(run, "BUSY", BUSY_MESSAGE);
        });
      }
    });
  }

  /** Types a run's command at the prompt, once the screen has parsed up to it (bracketed paste is on or off there). */
  private typeRun(run: Run): void {
    run.typed = true;
    const type = () => {
      if (run.answered || this.exited) return;
      // A paste when the shell takes one: typed as text, so a tab or a key binding in it does nothing.
      const { command } = run;
      const text = this.port.screen.bracketedPaste ? `${BRACKETED_PASTE_START}${command}${BRACKETED_PASTE_END}\r` : `${command}\r`;
      this.port.type(Buffer.from(text, "utf8"));
    };
    // A screen with nothing left to parse is already as it is now: no need to wait for its timer.
    if (this.port.screen.settled) type();
    else this.port.screen.afterParsed(type);
  }

  /** The process has exited (after its last output was pushed). A run under way ends with it. */
  processExited(exitCode: number | null): void {
    this.exited = true;
    const run = this.command?.run;
    if (run && !run.answered) this.answer(run, { exitCode, to: this.offset, timedOut: false });
    if (this.pendingRun) this.refuseRun(this.pendingRun, "SESSION_EXITED", "the session's process exited before the command ran");
    this.pendingRun = null;
  }

  /** The session is over here: timers stop, a run still waiting is told so. */
  dispose(): void {
    this.exited = true;
    const runs = [this.pendingRun, this.command?.run ?? null];
    for (const run of runs) if (run && !run.answered) this.refuseRun(run, "SESSION_EXITED", "the session ended");
    this.pendingRun = null;
    this.forgetPrompt();
  }

  /** Output [from, to) (raw offsets, within this push) to the screen and to whoever reads it now. */
  private output(offset: number, bytes: Uint8Array, from: number, to: number): void {
    if (to <= from) return;
    const piece = bytes.subarray(from - offset, to - offset);
    this.port.screen.write(from, piece);
    const prompt = this.prompt;
    if (prompt && prompt.text.length < PROMPT_TEXT_CHARS) {
      const { text, ends } = prompt.stripper.push(piece);
      if (prompt.lineEnd === null) {
        const newline = text.indexOf("\n");
        if (newline >= 0) prompt.lineEnd = ends[newline] as number;
      }
      prompt.text += text.slice(0, PROMPT_TEXT_CHARS - prompt.text.length);
    }
    this.command?.run?.output?.push(piece);
  }

  private mark(mark: ShellMark): void {
    this.integrated = true;
    switch (mark.kind) {
      case "A":
        // A new prompt: a command still open never said how it ended (its D is gone).
        this.endCommand(mark.start, null);
        this.forgetPrompt();
        return;
      case "B":
        return this.promptDrawn(mark);
      case "C":
        return this.commandStarted(mark);
      case "D":
        return this.commandEnded(mark);
    }
  }

  private promptDrawn(mark: ShellMark): void {
    this.endCommand(mark.start, null);
    this.forgetPrompt();
    const prompt: Prompt = { stripper: new TextStripper(mark.end), text: "", lineEnd: null, position: null, superseded: false };
    this.prompt = prompt;
    this.port.screen.afterParsed(() => {
      const position = this.port.screen.cursorPosition();
      if (prompt.superseded) position?.dispose();
      else prompt.position = position;
    });
    // A run asked for while the prompt was due.
    if (this.pendingRun && !this.pendingRun.typed) this.typeRun(this.pendingRun);
  }

  private commandStarted(mark: ShellMark): void {
    this.endCommand(mark.start, null);
    const prompt = this.prompt;
    this.prompt = null;
    // The C of a run typed at the prompt (one still waiting for a prompt is not this command).
    const run = this.pendingRun?.typed ? this.pendingRun : null;
    if (run) this.pendingRun = null;
    const command: Command = { from: mark.end, startedAt: Date.now(), text: run ? run.command : null, run };
    this.command = command;
    if (run) {
      run.from = mark.end;
      run.startedAt = command.startedAt;
      run.output = new OutputText(mark.end);
    }
    if (command.text !== null) {
      if (prompt) prompt.superseded = true;
      prompt?.position?.dispose();
      return;
    }
    // Typed by hand: the command line as the screen shows it at C (edits applied, wrapped rows
    // joined), else as it was echoed.
    const echoed = prompt ? firstLine(prompt.text) : "";
    this.port.screen.afterParsed(() => {
      const shown = prompt?.position ? this.port.screen.textSince(prompt.position) : null;
      if (prompt) prompt.superseded = true;
      prompt?.position?.dispose();
      command.text = clip(shown ?? echoed);
      this.reportEnded();
    });
  }

  private commandEnded(mark: ShellMark): void {
    if (this.command) return this.endCommand(mark.start, mark.exitCode);
    // A D with no C after the line was entered (a line break since B): it ran nothing (empty,
    // Ctrl+C) or did not parse (a syntax error). Without one it is the prompt drawn again (a
    // resize: PS1 has a D of its own), and a run typed meanwhile is still to come.
    const run = this.pendingRun;
    const prompt = this.prompt;
    if (!run?.typed || prompt?.lineEnd === null || prompt?.lineEnd === undefined) return;
    this.pendingRun = null;
    if (run.answered) return;
    const from = prompt.lineEnd;
    const output = prompt.text.slice(prompt.text.indexOf("\n") + 1);
    run.from = from;
    run.output = new OutputText(from, output);
    this.answer(run, { exitCode: mark.exitCode, to: Math.max(from, mark.start), timedOut: false });
  }

  /** The command running (if any) ended at `to`. */
  private endCommand(to: number, exitCode: number | null): void {
    const command = this.command;
    if (!command) return;
    this.command = null;
    this.ended.push({ command, report: { exitCode, from: command.from, to, startedAt: command.startedAt, endedAt: Date.now() } });
    // The report first (unless an earlier one still waits for the screen): a run answered is listed.
    this.reportEnded();
    if (command.run && !command.run.answered) this.answer(command.run, { exitCode, to, timedOut: false });
  }

  /** Reports ended commands in order, as their text is known. */
  private reportEnded(): void {
    while (this.ended.length > 0) {
      const { command, report } = this.ended[0] as Ended;
      if (command.text === null) return;
      this.ended.shift();
      const full: CommandReport = { command: command.text, ...report };
      this.recentReports.push(full);
      if (this.recentReports.length > RECENT_COMMANDS) this.recentReports.shift();
      this.port.onCommand(full);
    }
  }

  private timedOut(run: Run): void {
    run.timer = undefined;
    if (!run.answered) this.answer(run, { exitCode: null, to: this.offset, timedOut: true });
    // Never typed (no prompt came): it never will be. Typed: its C is still to be told apart.
    if (this.pendingRun === run && !run.typed) this.pendingRun = null;
  }

  private answer(run: Run, end: { exitCode: number | null; to: number; timedOut: boolean }): void {
    run.answered = true;
    if (run.timer) clearTimeout(run.timer);
    run.timer = undefined;
    const output = run.output ?? new OutputText(run.from);
    run.output = null; // answered: what follows is not kept
    const { text, truncated } = output.result(!end.timedOut);
    run.answer({
      ok: true,
      result: {
        command: run.command,
        exitCode: end.exitCode,
        output: text,
        from: run.from,
        to: Math.max(run.from, end.to),
        startedAt: run.startedAt,
        durationMs: Math.max(0, Date.now() - run.startedAt),
        timedOut: end.timedOut,
        truncated,
      },
    });
  }

  private refuseRun(run: Run, code: FailureCode, message: string): void {
    run.answered = true;
    if (run.timer) clearTimeout(run.timer);
    run.timer = undefined;
    run.answer({ ok: false, code, message });
  }

  private forgetPrompt(): void {
    const prompt = this.prompt;
    if (!prompt) return;
    prompt.superseded = true;
    prompt.position?.dispose();
    this.prompt = null;
  }
}

/** A run's output as clean text, at most MAX_RUN_OUTPUT_BYTES of UTF-8. */
class OutputText {
  private readonly stripper: TextStripper;
  private readonly parts: string[] = [];
  private bytes = 0;
  private truncated = false;

  constructor(from: number, initial = "") {
    this.stripper = new TextStripper(from);
    this.add(initial);
  }

  push(raw: Uint8Array): void {
    if (!this.truncated) this.add(this.stripper.push(raw).text);
  }

  /** The text so far; `final` also takes a character left incomplete at the end. */
  result(final: boolean): { text: string; truncated: boolean } {
    if (final && !this.truncated) this.add(this.stripper.flush().text);
    return { text: this.parts.join(""), truncated: this.truncated };
  }

  private add(text: string): void {
    if (text.length === 0 || this.truncated) return;
    const size = utf8ByteLength(text);
    if (this.bytes + size <= MAX_RUN_OUTPUT_BYTES) {
      this.parts.push(text);
      this.bytes += size;
      return;
    }
    this.truncated = true;
    const kept = utf8Prefix(text, MAX_RUN_OUTPUT_BYTES - this.bytes);
    this.parts.push(kept);
    this.bytes += utf8ByteLength(kept);
  }
}

/** The longest prefix of `text` of at most `bytes` UTF-8 bytes (never half a character). */
function utf8Prefix(text: string, bytes: number): string {
  let size = 0;
  let i = 0;
  while (i < text.length) {
    const code = text.codePointAt(i) as number;
    const units = code > 0xffff ? 2 : 1;
    const length = code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
    if (size + length > bytes) break;
    size += length;
    i += units;
  }
  return text.slice(0, i);
}

/** The echoed command line: the text up to its first line break. */
function firstLine(text: string): string {
  const newline = text.indexOf("\n");
  return newline < 0 ? text : text.slice(0, newline);
}

/**
 * A command's text as reported: trailing space removed, at most MAX_COMMAND_TEXT characters.
 * `trimEnd` removes what `/\s+$/` would (white space and line terminators) in linear time: the
 * regular expression retries at every space of a run that does not reach the end, quadratic in a
 * command line a tenant types (100,000 spaces and an `x` held the runner's thread 3.5 s).
 */
export function clip(text: string): string {
  const trimmed = text.trimEnd();
  return trimmed.length > MAX_COMMAND_TEXT ? trimmed.slice(0, MAX_COMMAND_TEXT) : trimmed;
}
