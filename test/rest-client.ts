// The REST side of the end-to-end tests: `Api`, a small client of the public routes (sessions,
// input, output ranges, the agent layer), and `fetchOutput`, a session's whole retained output.
import type { CommandRecord, ExpectResult, RunResult, ScreenState } from "../shared/agent.js";
import type { Session } from "../shared/session.js";
import { until } from "./waits.js";

export interface ApiResponse<T = unknown> {
  status: number;
  body: T;
  headers: Headers;
}

export class Api {
  constructor(
    readonly url: string,
    readonly key: string | null,
  ) {}

  async request<T = any>(
    method: string,
    path: string,
    body?: unknown,
    rawBody?: string,
    extraHeaders: Record<string, string> = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...extraHeaders };
    if (this.key) headers.authorization = `Bearer ${this.key}`;
    if (body !== undefined || rawBody !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(`${this.url}${path}`, {
      method,
      headers,
      body: rawBody ?? (body === undefined ? undefined : JSON.stringify(body)),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: keep the text
    }
    return { status: res.status, body: parsed as T, headers: res.headers };
  }

  async create(body: Record<string, unknown> = {}): Promise<Session> {
    const res = await this.request<Session>("POST", "/v1/sessions", body);
    if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  async input(id: string, data: string): Promise<void> {
    const res = await this.request("POST", `/v1/sessions/${id}/input`, { data });
    if (res.status !== 202) throw new Error(`input failed: ${res.status} ${JSON.stringify(res.body)}`);
  }

  async get(id: string): Promise<Session> {
    const res = await this.request<Session>("GET", `/v1/sessions/${id}`);
    if (res.status !== 200) throw new Error(`get failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /** Deletes with purge, for cleanup; ignores sessions already gone. */
  async destroy(id: string): Promise<void> {
    await this.request("DELETE", `/v1/sessions/${id}?purge=true`);
  }

  // ---- the agent layer (docs/protocol.md §3, "Agents") ----

  /** `POST .../input` as it answers (202 `{bytes, offset}`), with an `Idempotency-Key` when given. */
  inputRequest(
    id: string,
    body: { data: string; encoding?: "utf8" | "base64"; eof?: boolean },
    idempotencyKey?: string,
  ): Promise<ApiResponse<{ bytes: number; offset: number }>> {
    const headers: Record<string, string> = idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey };
    return this.request("POST", `/v1/sessions/${id}/input`, body, undefined, headers);
  }

  /** `POST .../input`, 202 or throw: `{bytes, offset}`, `offset` being where what it causes starts. */
  async inputAt(id: string, data: string, idempotencyKey?: string): Promise<{ bytes: number; offset: number }> {
    const res = await this.inputRequest(id, { data }, idempotencyKey);
    if (res.status !== 202) throw new Error(`input failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /**
   * `GET .../output?from=&to=&stream=`: only `stream`'s bytes of the merged range [from, to)
   * (`pty: false`), following `X-Offset-To` (a range in the merged offset space) until `to`.
   */
  async outputStream(id: string, stream: "stdout" | "stderr", from: number, to: number): Promise<Buffer> {
    const parts: Buffer[] = [];
    let cursor = from;
    while (cursor < to) {
      const res = await fetch(`${this.url}/v1/sessions/${id}/output?from=${cursor}&to=${to}&stream=${stream}`, {
        headers: this.key ? { authorization: `Bearer ${this.key}` } : {},
      });
      if (res.status !== 200) throw new Error(`output failed: ${res.status} ${await res.text()}`);
      const bytes = Buffer.from(await res.arrayBuffer());
      const got = { from: Number(res.headers.get("x-offset-from")), to: Number(res.headers.get("x-offset-to")) };
      if (got.from !== cursor) throw new Error(`output from ${cursor} started at ${got.from} (trimmed?)`);
      if (bytes.byteLength > got.to - got.from) throw new Error(`headers ${JSON.stringify(got)} vs ${bytes.length} bytes`);
      if (got.to > to) throw new Error(`output to ${to} went on to ${got.to}`);
      if (got.to === cursor) throw new Error(`output [${cursor}, ${to}) of ${stream} moved nothing: only ${got.to} produced?`);
      parts.push(bytes);
      cursor = got.to;
    }
    return Buffer.concat(parts);
  }

  /** `POST .../expect` as it answers. */
  expectRequest(
    id: string,
    body: { pattern: string; literal?: boolean; flags?: string; from?: number; timeoutSec?: number },
  ): Promise<ApiResponse<ExpectResult>> {
    return this.request("POST", `/v1/sessions/${id}/expect`, body);
  }

  /** `POST .../expect`, 200 or throw. */
  async expectOutput(
    id: string,
    body: { pattern: string; literal?: boolean; flags?: string; from?: number; timeoutSec?: number },
  ): Promise<ExpectResult> {
    const res = await this.expectRequest(id, body);
    if (res.status !== 200) throw new Error(`expect failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /** `POST .../run` as it answers. */
  runRequest(id: string, command: string, timeoutSec?: number): Promise<ApiResponse<RunResult>> {
    return this.request("POST", `/v1/sessions/${id}/run`, timeoutSec === undefined ? { command } : { command, timeoutSec });
  }

  /**
   * `POST .../run`, asked again while it answers 409 BUSY (a shell still starting, or still
   * busy with a command): the result once it ran, or throw on any other answer or at the deadline.
   */
  async run(id: string, command: string, options: { timeoutSec?: number; deadlineMs?: number } = {}): Promise<RunResult> {
    const deadline = Date.now() + (options.deadlineMs ?? 20_000);
    for (;;) {
      const res = await this.runRequest(id, command, options.timeoutSec);
      if (res.status === 200) return res.body;
      const code = (res.body as any)?.error?.code;
      if (res.status !== 409 || code !== "BUSY" || Date.now() > deadline) {
        throw new Error(`run ${JSON.stringify(command)} failed: ${res.status} ${JSON.stringify(res.body)}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** The session once it has ended (`GET .../wait` until it has), or throw at the deadline. */
  async ended(id: string, deadlineMs = 20_000): Promise<Session> {
    return until(
      async () => {
        const res = await this.request<Session>("GET", `/v1/sessions/${id}/wait?timeoutSec=5`);
        if (res.status !== 200) throw new Error(`wait failed: ${res.status} ${JSON.stringify(res.body)}`);
        return res.body.status === "starting" || res.body.status === "running" ? undefined : res.body;
      },
      deadlineMs,
      `session ${id} to end`,
    );
  }

  /** `GET .../commands` once the shell has ended at least `count` commands (or throw at the deadline). */
  async commandsWhen(id: string, count = 1, deadlineMs = 15_000): Promise<CommandRecord[]> {
    return until(
      async () => {
        const list = await this.commands(id);
        return list.length >= count ? list : undefined;
      },
      deadlineMs,
      `${count} command${count === 1 ? "" : "s"} of session ${id} to end`,
    );
  }

  /** `GET .../commands`, 200 or throw. */
  async commands(id: string, limit?: number): Promise<CommandRecord[]> {
    const res = await this.request<{ commands: CommandRecord[] }>(
      "GET",
      `/v1/sessions/${id}/commands${limit === undefined ? "" : `?limit=${limit}`}`,
    );
    if (res.status !== 200) throw new Error(`commands failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.commands;
  }

  /** `GET .../screen` (json), 200 or throw. */
  async screen(id: string): Promise<ScreenState> {
    const res = await this.request<ScreenState>("GET", `/v1/sessions/${id}/screen?format=json`);
    if (res.status !== 200) throw new Error(`screen failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /** `GET .../screen?format=text|ansi`: the body's bytes and the headers. */
  async screenRaw(id: string, format: "text" | "ansi"): Promise<{ status: number; bytes: Buffer; headers: Headers }> {
    const res = await fetch(`${this.url}/v1/sessions/${id}/screen?format=${format}`, {
      headers: this.key ? { authorization: `Bearer ${this.key}` } : {},
    });
    return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()), headers: res.headers };
  }

  /** The raw output [from, to) from `GET .../output?from=&to=`, following `X-Offset-To` until `to`. */
  async outputRange(id: string, from: number, to: number): Promise<Buffer> {
    const parts: Buffer[] = [];
    let cursor = from;
    while (cursor < to) {
      const res = await fetch(`${this.url}/v1/sessions/${id}/output?from=${cursor}&to=${to}`, {
        headers: this.key ? { authorization: `Bearer ${this.key}` } : {},
      });
      if (res.status !== 200) throw new Error(`output failed: ${res.status} ${await res.text()}`);
      const bytes = Buffer.from(await res.arrayBuffer());
      const got = { from: Number(res.headers.get("x-offset-from")), to: Number(res.headers.get("x-offset-to")) };
      if (got.from !== cursor) throw new Error(`output from ${cursor} started at ${got.from} (trimmed?)`);
      if (got.to - got.from !== bytes.byteLength) throw new Error(`headers ${JSON.stringify(got)} vs ${bytes.length} bytes`);
      if (got.to > to) throw new Error(`output to ${to} went on to ${got.to}`);
      if (bytes.byteLength === 0) throw new Error(`output [${cursor}, ${to}) answered nothing: only ${got.to} produced?`);
      parts.push(bytes);
      cursor = got.to;
    }
    return Buffer.concat(parts);
  }
}

/**
 * Everything `GET .../output` holds from `from`, following `X-Offset-To` across responses. The
 * first page may start after `from` (history trimmed: the answer's `from` says where it starts);
 * every later page must start exactly where the one before ended, so a hole in the middle of the
 * log throws instead of being joined over.
 */
export async function fetchOutput(
  api: Api,
  id: string,
  from?: number,
): Promise<{ from: number; to: number; bytes: Buffer }> {
  const session = await api.get(id);
  const parts: Buffer[] = [];
  let start: number | undefined;
  let cursor = from;
  for (;;) {
    const query = cursor === undefined ? "" : `?from=${cursor}`;
    const res = await fetch(`${api.url}/v1/sessions/${id}/output${query}`, {
      headers: { authorization: `Bearer ${api.key}` },
    });
    if (res.status !== 200) throw new Error(`output failed: ${res.status} ${await res.text()}`);
    const bytes = Buffer.from(await res.arrayBuffer());
    const got = { from: Number(res.headers.get("x-offset-from")), to: Number(res.headers.get("x-offset-to")) };
    if (got.to - got.from !== bytes.byteLength) throw new Error(`headers ${JSON.stringify(got)} vs ${bytes.length} bytes`);
    if (start !== undefined && got.from !== cursor) {
      throw new Error(`output of ${id}: the page after ${cursor} started at ${got.from} (a hole in the log)`);
    }
    start ??= got.from;
    parts.push(bytes);
    if (got.to >= session.offset) return { from: start, to: got.to, bytes: Buffer.concat(parts) };
    if (bytes.byteLength === 0) throw new Error(`output of ${id}: nothing after ${got.to}, though the session is at ${session.offset}`);
    cursor = got.to;
  }
}
