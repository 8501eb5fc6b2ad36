// The REST layer's deadlines and error text, with a scripted fetch standing in for the network.
// The real stack runs them in test/sdk-errors.test.ts (a closed port, a blackholed proxy) and
// test/reconnect-deadlines.test.ts (a token fetch caught in a silent drop).
import { describe, expect, it } from "vitest";
import { PtyBrokerError } from "./errors.js";
import { describeFailure, Http } from "./http.js";

/** A fetch that never answers, but hears its signal as a real one does. */
const silent: typeof fetch = (_input, init) =>
  new Promise((_resolve, reject) => {
    init?.signal?.addEventListener("abort", () => reject(init.signal?.reason), { once: true });
  });

describe("Http deadlines", () => {
  it("a call with no answer fails as NETWORK naming the URL and the timeout", async () => {
    const http = new Http("http://edge.test:8877/", { apiKey: "k" }, silent, 20);
    const error = await http.json("POST", "/v1/sessions/s/tokens", { role: "writer" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PtyBrokerError);
    expect(error).toMatchObject({
      code: "NETWORK",
      status: 0,
      message: "POST http://edge.test:8877/v1/sessions/s/tokens: no answer within 20 ms (timeout)",
    });
  });

  it("the caller's own abort is its reason, not NETWORK", async () => {
    const http = new Http("http://edge.test", { apiKey: "k" }, silent, 60_000);
    const controller = new AbortController();
    const call = http.json("GET", "/v1/sessions", undefined, { signal: controller.signal });
    const reason = new Error("changed my mind");
    controller.abort(reason);
    await expect(call).rejects.toBe(reason);
  });

  it("a call the server holds (`holds`) has no deadline of the SDK's own", async () => {
    let answer: ((res: Response) => void) | undefined;
    let aborted = false;
    const held: typeof fetch = (_input, init) => {
      init?.signal?.addEventListener("abort", () => (aborted = true));
      return new Promise((resolve) => (answer = resolve));
    };
    const http = new Http("http://edge.test", { apiKey: "k" }, held, 1);
    const call = http.json<{ status: string }>("GET", "/v1/sessions/s/wait", undefined, { holds: true });
    // Well past the 1 ms deadline a held call would have had.
    await new Promise((resolve) => setTimeout(resolve, 30));
    answer?.(Response.json({ status: "exited" }));
    expect(await call).toEqual({ status: "exited" });
    expect(aborted).toBe(false);
  });

  it("send(): the deadline covers the headers; a body read afterwards is not cut", async () => {
    let push: ((text: string) => void) | undefined;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        push = (text) => {
          controller.enqueue(new TextEncoder().encode(text));
          controller.close();
        };
      },
    });
    const http = new Http("http://edge.test", { apiKey: "k" }, async () => new Response(body), 10);
    const res = await http.send("GET", "/v1/sessions/s/recording");
    await new Promise((resolve) => setTimeout(resolve, 30));
    push?.("late bytes");
    expect(await res.text()).toBe("late bytes");
  });

  it("refuses a deadline that is not a positive number", () => {
    expect(() => new Http("http://edge.test", { apiKey: "k" }, silent, 0)).toThrow(/timeoutMs is a positive number/);
  });
});

describe("describeFailure", () => {
  const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), { code: "ECONNREFUSED" });

  it("adds the cause Node's fetch keeps apart: its message, its code when the message lacks it", () => {
    expect(describeFailure(new TypeError("fetch failed", { cause: refused }))).toBe("fetch failed (connect ECONNREFUSED 127.0.0.1:9)");
    const reset = Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" });
    expect(describeFailure(new TypeError("fetch failed", { cause: reset }))).toBe("fetch failed (UND_ERR_SOCKET: other side closed)");
  });

  it("an AggregateError cause (one error per address tried) is read by its errors", () => {
    const v6 = Object.assign(new Error("connect ECONNREFUSED ::1:9"), { code: "ECONNREFUSED" });
    const all = Object.assign(new AggregateError([v6, refused]), { code: "ECONNREFUSED" });
    expect(describeFailure(new TypeError("fetch failed", { cause: all }))).toBe(
      "fetch failed (connect ECONNREFUSED ::1:9; connect ECONNREFUSED 127.0.0.1:9)",
    );
  });

  it("a failure without a cause (a browser's) is its message", () => {
    expect(describeFailure(new TypeError("Failed to fetch"))).toBe("Failed to fetch");
  });
});
