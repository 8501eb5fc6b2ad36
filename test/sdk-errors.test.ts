// The SDK's papercuts, on the real stack (issue 25): `onState` sees the connection from its
// first state; a request that gets no answer names the host it went to and why (a closed port,
// a silent network past the deadline); a refusal heard as a WebSocket close code carries the HTTP
// status of its error code.
import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { type ConnectionState, PtyBroker, PtyBrokerError } from "../client/index.js";
import { TENANTS } from "./global-setup.js";
import { onSharedStack } from "./harness.js";
import { startProxy } from "./tcp-proxy.js";

const suite = onSharedStack();
const { url, cleanup } = suite;
const broker = new PtyBroker({ url, apiKey: TENANTS.acme });
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };

/** A port nothing listens on: one the kernel gave out and took back. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("SDK papercuts", () => {
  it("onState in create() hears connecting, then open, before create resolves; then closed", async () => {
    const states: ConnectionState[] = [];
    const pty = await broker.create({ ...BASH, onState: (state) => states.push(state) });
    suite.purgeLater(pty.id);
    expect(states).toEqual(["connecting", "open"]);
    pty.close();
    expect(states).toEqual(["connecting", "open", "closed"]);
  });

  it("a closed port: NETWORK naming the URL's host and the cause (ECONNREFUSED)", async () => {
    const port = await closedPort();
    const error = await new PtyBroker({ url: `http://127.0.0.1:${port}`, apiKey: TENANTS.acme }).list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PtyBrokerError);
    expect(error).toMatchObject({ code: "NETWORK", status: 0 });
    expect((error as Error).message).toBe(
      `GET http://127.0.0.1:${port}/v1/sessions?limit=1000: fetch failed (connect ECONNREFUSED 127.0.0.1:${port})`,
    );
  });

  it("a silent network: NETWORK after timeoutMs, naming the call; a call the server holds is not cut by it", async () => {
    const proxy = await startProxy(Number(new URL(url).port));
    cleanup.proxy(proxy);
    const quick = new PtyBroker({ url: proxy.url, apiKey: TENANTS.acme, timeoutMs: 500 });
    const session = await quick.createSession(BASH);
    suite.purgeLater(session.id);
    // `wait` is held by the server for up to timeoutSec, well past the 500 ms deadline.
    const waited = await quick.wait(session.id, { timeoutSec: 2 });
    expect(waited).toMatchObject({ id: session.id, status: "running" });

    proxy.blackhole(true);
    const error = await quick.get(session.id).catch((e: unknown) => e);
    proxy.blackhole(false);
    expect(error).toBeInstanceOf(PtyBrokerError);
    expect(error).toMatchObject({
      code: "NETWORK",
      message: `GET ${proxy.url}/v1/sessions/${session.id}: no answer within 500 ms (timeout)`,
    });
  });

  it("connect() to an unknown session: NOT_FOUND with the status 404, by close code (Node) and by REST (a token minted first)", async () => {
    await expect(broker.connect("no-such-session")).rejects.toMatchObject({ code: "NOT_FOUND", status: 404 });
    const { default: WebSocket } = await import("ws");
    const browserLike = new PtyBroker({ url, apiKey: TENANTS.acme, WebSocket: WebSocket as never });
    await expect(browserLike.connect("no-such-session")).rejects.toMatchObject({ code: "NOT_FOUND", status: 404 });
  });
});
