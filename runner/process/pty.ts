// The one module that imports node-pty: spawns a process on a pseudo-terminal and
// exposes only what a hosted session needs.
import { chownSync, chmodSync, constants as fsConstants, readFileSync, readSync } from "node:fs";
import { Socket } from "node:net";
import { constants } from "node:os";
import * as nodePty from "node-pty";
import { log } from "../../shared/log.js";
import { statFields } from "./proc.js";
import type { ProcessExit, SessionProcess } from "./session-process.js";

/** A terminal process is a SessionProcess whose output is all "stdout". */
export type PtyExit = ProcessExit;
export type PtyProcess = SessionProcess;

export interface PtyOptions {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  cols: number;
  rows: number;
  /**
   * Who the terminal belongs to when the session runs as another user than the runner: its
   * device is handed to that user (mode 0600) at once, as a login would, so that tools that
   * open their terminal by name work and no other user (nor `write`/`wall`) can write to it.
   */
  terminalOwner?: { uid: number; gid: number };
}

const SIGNAL_NAMES = new Map<number, string>(Object.entries(constants.signals).map(([name, num]) => [num, name]));

export function spawnPty(options: PtyOptions): PtyProcess {
  const term = nodePty.spawn(options.command, options.args, {
    name: options.env.TERM ?? "xterm-256color",
    cols: options.cols,
    rows: options.rows,
    cwd: options.cwd,
    env: options.env,
    encoding: null, // Buffers: bytes pass through untouched
  });
  const pid = term.pid;
  if (options.terminalOwner) {
    try {
      handTerminal(term, options.terminalOwner);
    } catch (error) {
      term.kill("SIGKILL"); // not started as asked: the caller reports the failure
      throw error;
    }
  }

  const dataListeners: ((bytes: Buffer, stream: "stdout") => void)[] = [];
  const exitListeners: ((exit: PtyExit) => void)[] = [];
  let paused = false;
  let flushing = false;
  /** Bytes that arrived while paused (only the close-time drain produces those), oldest first. */
  const held: Buffer[] = [];
  /** node-pty's exit, kept until `held` is empty. */
  let exit: PtyExit | null = null;
  let exitReported = false;

  const deliver = (bytes: Buffer) => {
    if (paused || held.length > 0) held.push(bytes);
    else for (const listener of dataListeners) listener(bytes, "stdout");
  };
  // Passes on held bytes in order, then the exit once nothing is held back any more.
  const flush = () => {
    if (flushing) return; // a listener called resume(): the loop below carries on
    flushing = true;
    try {
      while (!paused && held.length > 0) {
        const bytes = held.shift() as Buffer;
        for (const listener of dataListeners) listener(bytes, "stdout");
      }
    } finally {
      flushing = false;
    }
    if (held.length === 0 && exit && !exitReported) {
      exitReported = true;
      for (const listener of exitListeners) listener(exit);
    }
  };

  // With `encoding: null` node-pty hands out Buffers; its typings still say string.
  term.onData((chunk) => deliver(chunk as unknown as Buffer));
  drainBeforeClose(term, pid, deliver);
  // node-pty reports the exit only after its read side has closed, so after the drain.
  term.onExit(({ exitCode, signal }) => {
    const name = signal ? (SIGNAL_NAMES.get(signal) ?? `SIG${signal}`) : null;
    exit = { exitCode: name ? null : exitCode, signal: name };
    flush();
  });

  return {
    pid,
    onData(listener) {
      dataListeners.push(listener);
    },
    onExit(listener) {
      exitListeners.push(listener);
    },
    write(bytes) {
      term.write(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)); // node-pty copies it
    },
    pendingInput() {
      return queuedInput(term);
    },
    closeStdin() {
      term.write("\x04"); // Ctrl+D: the line discipline's end of file, as a person would type it
    },
    resize(cols, rows) {
      term.resize(cols, rows);
    },
    foregroundGroup() {
      return foregroundGroup(pid);
    },
    signalProcess(signal) {
      process.kill(pid, signal);
    },
    pause() {
      paused = true;
      term.pause();
    },
    resume() {
      paused = false;
      flush();
      if (!paused) term.resume();
    },
  };
}

/**
 * Bytes in node-pty's write queue (its private `_writeStream._writeQueue` of {buffer, offset},
 * node-pty 1.1.0): what the terminal has not taken yet. 0 if the field is not as expected.
 */
function queuedInput(term: nodePty.IPty): number {
  const stream = (term as unknown as { _writeStream?: { _writeQueue?: unknown } })._writeStream;
  const queue = stream?._writeQueue;
  if (!Array.isArray(queue)) return 0;
  let bytes = 0;
  for (const task of queue as { buffer?: Buffer; offset?: number }[]) {
    bytes += (task.buffer?.byteLength ?? 0) - (task.offset ?? 0);
  }
  return bytes;
}

/** chown/chmod of the terminal's device, named by node-pty's `ptsName` (ptsname(3) of the master, untyped in 1.1.0). */
function handTerminal(term: nodePty.IPty, owner: { uid: number; gid: number }): void {
  const device = (term as unknown as { ptsName?: unknown }).ptsName;
  if (typeof device !== "string" || !device.startsWith("/dev/")) throw new Error("node-pty did not name the terminal's device");
  chownSync(device, owner.uid, owner.gid);
  chmodSync(device, 0o600);
}

/** The terminal's foreground process group (tpgid); the session's own group as a fallback. */
function foregroundGroup(pid: number): number {
  const tpgid = Number(statFields(pid)?.[5]);
  return tpgid > 0 ? tpgid : pid;
}

// Platform quirk (Linux): when the last process holding the terminal's slave side exits
// right after writing, libuv's read of the master can return EIO while the kernel still
// has the final bytes queued (tty flip buffer -> line discipline). Node then destroys the
// socket, which closes the master fd, and those bytes - often the last few KB - are lost;
// waiting after exit cannot help. The same happens to bytes Node had already read but not
// yet emitted because the socket was paused, and node-pty destroys a paused socket 200 ms
// after the process exits. So, at the moment node-pty's socket is destroyed and while its
// fd is still open: pass on what the socket still buffers, then read the fd synchronously
// until EIO (slave gone and nothing left). This is the only code that touches node-pty's
// private fields (`_socket`, a tty.ReadStream over the master fd, and `_fd`, that fd); if
// they are not as expected we log once and run without the drain.
const EAGAIN_WAIT_MS = 50; // total wait for bytes still on their way to a non-blocking fd
const DRAIN_LIMIT_MS = 250; // the drain blocks the event loop: never longer than this
const DRAIN_LIMIT_BYTES = 4 << 20; // the kernel holds far less; more means a live writer
let warnedNoDrain = false;

function drainBeforeClose(term: nodePty.IPty, pid: number, deliver: (bytes: Buffer) => void): void {
  const { _socket: socket, _fd: fd } = term as unknown as { _socket?: unknown; _fd?: unknown };
  if (process.platform !== "linux" || !(socket instanceof Socket) || typeof fd !== "number") {
    if (!warnedNoDrain) log.warn("pty.drain", { outcome: "unavailable", platform: process.platform });
    warnedNoDrain = true;
    return;
  }
  const destroy = socket._destroy;
  socket._destroy = function (this: Socket, error, callback) {
    let buffered = 0;
    let drained = 0;
    try {
      // Paused: Node may hold bytes it read but has not emitted; read() emits them as 'data'
      // (node-pty forwards that to `deliver`), unless the stream already reported an error.
      let seen = 0;
      const count = (bytes: Buffer) => (seen += bytes.length);
      socket.prependListener("data", count);
      try {
        for (let rest; socket.readableLength > 0 && (rest = socket.read() as Buffer | null); ) {
          if (seen < buffered + rest.length) deliver(rest); // not emitted: pass it on ourselves
          buffered += rest.length;
          seen = buffered;
        }
      } finally {
        socket.removeListener("data", count);
      }
      drained = drainFd(fd, deliver);
    } catch (drainError) {
      log.warn("pty.drain", { pid, outcome: "failed", error: drainError });
    }
    if (buffered + drained > 0) log.debug("pty.drain", { pid, buffered, drained });
    destroy.call(this, error, callback);
  };
}

/** Reads `fd` until EIO, EOF, another error or a limit; returns the number of bytes passed on. */
function drainFd(fd: number, deliver: (bytes: Buffer) => void): number {
  if (!isNonBlocking(fd)) return 0; // a blocking read could wait forever for a live writer
  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  const chunk = Buffer.allocUnsafe(64 * 1024);
  const start = performance.now();
  let waitedMs = 0;
  let total = 0;
  while (total < DRAIN_LIMIT_BYTES && performance.now() - start < DRAIN_LIMIT_MS) {
    let n: number;
    try {
      n = readSync(fd, chunk, 0, chunk.length, null);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EAGAIN" || waitedMs >= EAGAIN_WAIT_MS) break;
      Atomics.wait(sleeper, 0, 0, 1); // slave still open somewhere: bytes may be in flight
      waitedMs += 1;
      continue;
    }
    if (n === 0) break;
    deliver(Buffer.from(chunk.subarray(0, n)));
    total += n;
  }
  return total;
}

/** O_NONBLOCK set on `fd` (libuv sets it on the master; checked, not assumed). */
function isNonBlocking(fd: number): boolean {
  try {
    const flags = /^flags:\s*([0-7]+)/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, "latin1"));
    return flags !== null && (parseInt(flags[1], 8) & fsConstants.O_NONBLOCK) !== 0;
  } catch {
    return false;
  }
}
