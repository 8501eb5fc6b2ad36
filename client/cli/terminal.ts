// `ptybroker attach` and `run`: the local terminal joined to a remote session, like `ssh -t`.
// Raw mode while attached; the remote size follows the local one; Ctrl+] detaches; the SDK
// reconnects on its own and resumes by offset; the terminal is restored on every way out. The
// local terminal's answers to queries in replayed output are not typed into the session
// (replay-replies.ts). Keys typed while the link is down are held by the SDK and sent once it is
// back; the status line says how many (status-line.ts).
import { spawnSync } from "node:child_process";
import type { ExitInfo, Pty, PtyBrokerError } from "../index.js";
import { endNote } from "./exit-status.js";
import { ReplayReplies } from "./replay-replies.js";
import { StatusLine } from "./status-line.js";

/** Ctrl+] — the same detach key as telnet and `docker attach`'s default family. */
export const DETACH_BYTE = 0x1d;

/**
 * What the CLI writes to the local terminal when it lets go of it (detach, exit, signal): the
 * modes a full-screen program (vim, less, htop) may have left on, turned off, as `reset` would,
 * without clearing the screen. CAN first ends an escape sequence the remote left half-written.
 */
export const TERMINAL_RESTORE =
  "\x18" + // CAN: abandon any escape sequence in progress
  "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l" + // mouse reporting and its encodings
  "\x1b[?1004l" + // focus events
  "\x1b[?2004l" + // bracketed paste
  "\x1b[?1l\x1b>" + // normal cursor keys, numeric keypad
  "\x1b[?25h" + // show the cursor
  "\x1b[0m"; // default colours and attributes

/** Home and erase the screen (not the scrollback), before a repaint of the remote's screen. */
const CLEAR_SCREEN = "\x1b[H\x1b[2J";

/** Leaves the alternate screen and puts the cursor back where it was before it was entered. */
const LEAVE_ALTERNATE = "\x1b[?1049l";

/**
 * Whether the remote's output left the terminal in the alternate screen: the last of
 * `CSI ? 1049/1047/47 h|l` seen decides. `CSI ? 1049 l` is only sent then, because outside the
 * alternate screen it still restores a saved cursor (xterm and tmux do), which would move the
 * cursor of a plain shell to wherever a program once saved it.
 */
export class AlternateScreenTracker {
  on = false;
  /** The end of the previous chunk, for a sequence split across two. */
  private tail = "";

  feed(bytes: Uint8Array): void {
    const text = this.tail + Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("latin1");
    // eslint-disable-next-line no-control-regex -- ESC is what the sequence starts with
    for (const match of text.matchAll(/\x1b\[\?(?:1049|1047|47)([hl])/g)) this.on = match[1] === "h";
    this.tail = text.slice(-8);
  }
}

export type AttachResult = { kind: "detached" } | { kind: "exited"; code: number; message: string | null };

/** Exit status of the CLI for a session's exit, the way shells report one: 128 + signal number. */
const SIGNAL_NUMBERS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGUSR2: 12,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
};

/** Signals that end the CLI (raw mode keeps Ctrl+C and Ctrl+\\ from the local terminal). */
const LOCAL_SIGNALS: NodeJS.Signals[] = ["SIGTERM", "SIGHUP", "SIGINT", "SIGQUIT"];

export interface Terminal {
  stdin: NodeJS.ReadStream;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
}

/** Attaches until the session ends (resolves `exited`) or the user presses Ctrl+] (`detached`). */
export function attach(pty: Pty, term: Terminal): Promise<AttachResult> {
  const { stdin, stdout, stderr } = term;
  const raw = stdin.isTTY === true;
  const status = new StatusLine(stderr, raw && stderr.isTTY === true);
  const note = (text: string) => status.note(text);
  let offlineSince: number | undefined;
  /** Drops so far: a reconnect's "typed input delivered" is said only if no drop came after it. */
  let drops = 0;
  /** Resolves once everything typed so far is written to the process: the last input the SDK took. */
  let typedAll: Promise<void> = Promise.resolve();
  /** A full queue was said; said again only after it had room. */
  let queueFull = false;
  let lastPending = 0;
  /** Errors already said, by message (an `error` event, a refusal every later key repeats). */
  const said = new Set<string>();
  const held = () => {
    const bytes = pty.pendingInput;
    return bytes === 0 ? "" : ` ${bytes} byte${bytes === 1 ? "" : "s"} typed, held until the session has them`;
  };
  const offline = () => `connection lost; reconnecting…${held()}`;
  const alternate = new AlternateScreenTracker();

  return new Promise<AttachResult>((resolve) => {
    let finished = false;
    let restored = false;
    const restore = () => {
      if (restored) return;
      restored = true;
      // The remote's output went to stdout: if that is a terminal, it may be in the remote
      // program's modes. TTY writes are synchronous, so this holds in an `exit` handler too.
      if (stdout.isTTY) stdout.write((alternate.on ? LEAVE_ALTERNATE : "") + TERMINAL_RESTORE);
      if (raw && stdin.isTTY) stdin.setRawMode(false);
    };
    const finish = (result: AttachResult) => {
      if (finished) return;
      finished = true;
      status.stop();
      stdout.off("resize", onResize);
      for (const signal of LOCAL_SIGNALS) process.off(signal, onSignal);
      unsubscribe.forEach((off) => off());
      const letGo = () => {
        stdin.off("data", onInput);
        stdin.pause();
        process.off("exit", restore);
        restore();
        resolve(result);
      };
      // Answers the terminal still owes for replayed queries are read and dropped first.
      if (replies) replies.settle(letGo);
      else letGo();
    };

    const send = (bytes: Buffer) => {
      if (bytes.byteLength === 0) return;
      const before = pty.pendingInput;
      const sent = pty.sendInput(bytes);
      if (pty.pendingInput > before) typedAll = sent; // taken, not refused at once
      sent.catch(notDelivered);
    };
    const notDelivered = (error: PtyBrokerError) => {
      // The session's end, or the CLI's own, is said once by `finish`.
      if (finished || error.code === "SESSION_EXITED" || error.code === "CLOSED" || said.has(error.message)) return;
      if (error.code === "QUOTA_EXCEEDED") {
        if (!queueFull) note(`input queue full: ${pty.pendingInput} bytes typed are held; what is typed beyond them is not delivered`);
        queueFull = true;
        return;
      }
      said.add(error.message);
      note(`input not delivered: ${error.message.replace(/^input not delivered: /, "")}`);
    };
    const onInput = (chunk: Buffer) => typed(replies ? replies.input(chunk) : chunk);
    const typed = (chunk: Buffer) => {
      if (finished) return;
      const detachAt = raw ? chunk.indexOf(DETACH_BYTE) : -1;
      if (detachAt < 0) return send(chunk);
      send(chunk.subarray(0, detachAt));
      finish({ kind: "detached" });
      pty.close();
    };
    // Only a terminal both writes to and reads from this process answers its output into stdin.
    const replies =
      raw && stdout.isTTY
        ? new ReplayReplies({ write: (text) => stdout.write(text), release: (bytes) => typed(bytes) })
        : undefined;
    /** Output is replay: from the attach, or a reconnect's `open`, until `live`. */
    let replaying = true;
    replies?.replaying();
    const onResize = () => {
      if (pty.readOnly || !stdout.columns || !stdout.rows) return;
      pty.resize({ cols: stdout.columns, rows: stdout.rows }).catch(() => undefined);
    };

    // Killed or hung up locally: the terminal goes back to normal and the session keeps running.
    const onSignal = (signal: NodeJS.Signals) => {
      finish({ kind: "exited", code: 128 + (SIGNAL_NUMBERS[signal] ?? 0), message: `${signal}: detached` });
      pty.close();
    };

    const onExit = (info: ExitInfo) => {
      const signalCode = info.signal ? 128 + (SIGNAL_NUMBERS[info.signal] ?? 0) : undefined;
      const code = info.exitCode ?? signalCode ?? (info.status === "exited" ? 0 : 255);
      finish({ kind: "exited", code, message: endNote(info) });
    };

    const unsubscribe = [
      pty.on("data", (bytes) => {
        status.moved();
        alternate.feed(bytes);
        if (replaying) replies?.replayed(bytes);
        stdout.write(bytes);
      }),
      pty.on("live", () => {
        replaying = false;
        replies?.live();
      }),
      pty.on("screen", ({ data }) => {
        // The session's screen instead of its history (a large one): drawn from the top of a
        // cleared screen, as tmux draws on attach. The repaint enters the alternate screen
        // itself when the remote is in it.
        alternate.feed(data);
        status.moved();
        stdout.write(CLEAR_SCREEN);
        stdout.write(data);
      }),
      pty.on("gap", ({ from, to }) => {
        alternate.on = true; // what came before is unknown: leave it, to be sure
        note(`${to - from} bytes of output before offset ${to} are no longer kept`);
      }),
      pty.on("state", (state) => {
        if (state === "open") {
          // A new socket replays what was missed while away before it goes live.
          replaying = true;
          replies?.replaying();
        }
        if (state === "reconnecting" && offlineSince === undefined) {
          offlineSince = Date.now();
          drops++;
          status.say(offline());
        } else if (state === "open" && offlineSince !== undefined) {
          const back = `reconnected after ${((Date.now() - offlineSince) / 1000).toFixed(1)} s`;
          offlineSince = undefined;
          // A resize may have happened while offline; the remote should match the window now.
          onResize();
          // What was typed meanwhile goes now (the SDK sends it again on every `hello`).
          if (pty.pendingInput === 0) status.say(back);
          else {
            status.say(`${back}; sending ${pty.pendingInput} bytes typed`);
            const drop = drops;
            typedAll.then(
              () => {
                if (!finished && drop === drops) status.amend(`${back}; typed input delivered`);
              },
              () => undefined, // said by notDelivered
            );
          }
        } else if (state === "closed" && !pty.exitInfo) {
          finish({ kind: "exited", code: 255, message: "the connection closed" });
        }
      }),
      pty.on("error", (error) => {
        said.add(error.message);
        if (error.code !== "CLOSED") note(`${error.code}: ${error.message}`);
      }),
      pty.on("pending", (bytes) => {
        if (bytes < lastPending) queueFull = false; // room again
        lastPending = bytes;
        if (pty.state === "reconnecting") status.sayLater(offline);
      }),
      pty.on("exit", (info) => onExit(info)),
    ];

    if (raw) {
      stdin.setRawMode(true);
      // libuv's raw mode keeps output post-processing on (ONLCR turns "\n" into "\r\n"), which
      // would move the cursor of a remote full-screen program. Turn it off as ssh does;
      // setRawMode(false) restores the terminal's original settings, OPOST included.
      spawnSync("stty", ["-opost"], { stdio: [stdin, "ignore", "ignore"] });
    }
    process.on("exit", restore);
    for (const signal of LOCAL_SIGNALS) process.on(signal, onSignal);
    stdin.on("data", onInput);
    stdin.resume();
    stdout.on("resize", onResize);
    // The remote starts at whatever size it had; make it the size of this window.
    if (
      raw &&
      stdout.columns &&
      stdout.rows &&
      (pty.session?.cols !== stdout.columns || pty.session?.rows !== stdout.rows)
    ) {
      onResize();
    }
    if (pty.exitInfo) onExit(pty.exitInfo);
  });
}
