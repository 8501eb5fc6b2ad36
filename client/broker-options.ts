// The options the SDK's calls take (`PtyBroker`'s constructor, create, exec, list, output and
// recording): plain types, exported from the package by index.ts.
import type { SessionLimits, SessionNetwork, SessionStatus } from "../shared/session.js";
import type { SocketLike } from "./pty-types.js";

export interface PtyBrokerOptions {
  /** The edge's base URL, e.g. `https://ptybroker.example.workers.dev`. */
  url: string;
  /** The tenant's API key. */
  apiKey?: string | undefined;
  /** A session token instead (`viewer` or `writer`, one session). */
  token?: string | undefined;
  fetch?: typeof fetch | undefined;
  /**
   * A WebSocket class with the browser's API. Default: the `ws` package in Node (which can send
   * the Authorization header), the global WebSocket elsewhere.
   */
  WebSocket?: (new (url: string) => SocketLike) | undefined;
  /**
   * Deadline of each REST call the server answers at once, in ms (default 10 s): one that gets
   * no answer in time fails as `NETWORK` naming the call. Calls the server holds on purpose
   * (`run`, `expect`, `wait`, `exec`, `events()`) are bound by their own `timeoutSec` instead.
   */
  timeoutMs?: number | undefined;
}

/**
 * The session's network and limits (absent: the runner's defaults). `network`: `"none"` (a
 * loopback of its own) or `"egress"` (outbound connections). `limits`: any of `memoryMiB`
 * (32..16384), `pids` (8..4096), `cpus` (0.05..8); past the maximum the server answers 400.
 */
export interface SandboxOptions {
  network?: SessionNetwork | undefined;
  limits?: { [K in keyof SessionLimits]?: SessionLimits[K] | undefined } | undefined;
}

export interface CreateOptions extends SandboxOptions {
  command?: string | undefined;
  args?: string[] | undefined;
  cwd?: string | undefined;
  env?: Record<string, string> | undefined;
  cols?: number | undefined;
  rows?: number | undefined;
  /** false: pipes for stdin, stdout and stderr instead of a terminal (then no cols/rows). */
  pty?: boolean | undefined;
  id?: string | undefined;
  tags?: string[] | undefined;
  label?: string | undefined;
  /** The most the session may live, in seconds (0: no limit). */
  timeoutSec?: number | undefined;
  /** End it after this many seconds without input or output (0: never). */
  idleTimeoutSec?: number | undefined;
  /** End it after this many seconds with no client attached (0: never). */
  detachedTimeoutSec?: number | undefined;
}

export interface ExecOptions extends SandboxOptions {
  args?: string[] | undefined;
  cwd?: string | undefined;
  env?: Record<string, string> | undefined;
  /** Written to the process, then its stdin is closed (at most 1 MiB). */
  stdin?: string | undefined;
  /** Killed with SIGKILL when this passes: 1..3600 s, default 60. */
  timeoutSec?: number | undefined;
  /** Most output the answer carries, stdout and stderr together (default 1 MiB). */
  maxOutputBytes?: number | undefined;
  /**
   * Stops waiting for the answer (the promise rejects with the signal's reason). The command
   * itself runs on until it ends or `timeoutSec` passes: the server does not tie it to the request.
   */
  signal?: AbortSignal | undefined;
}

/** A byte range of a session's output: `from` (default the oldest retained byte) up to `to` (default its end). */
export interface RecordingRange {
  from?: number | undefined;
  to?: number | undefined;
}

export interface ListFilter {
  status?: SessionStatus | undefined;
  tag?: string | undefined;
}

export interface ListPageOptions extends ListFilter {
  /** Sessions per page, 1..1000 (the server's default: 100). */
  limit?: number | undefined;
  /** `nextCursor` of the previous page; omitted for the first. */
  cursor?: string | undefined;
}

export interface OutputRange {
  from: number;
  to: number;
  bytes: Uint8Array;
}
