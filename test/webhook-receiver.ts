// A webhook receiver for the end-to-end tests: a real HTTP server on loopback that keeps every
// POST it gets (path, headers, raw body, the verdict of the `verify` it is given on its
// signature: the suites pass the SDK's verifyWebhook) and answers each with what the test's
// `answer` says (200 unless told). Tests wait on what arrives, with deadlines, never on time.
import { type IncomingHttpHeaders, type Server, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { until } from "./waits.js";

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** When it arrived (ms since the epoch). */
  at: number;
  /** The event's id header. */
  eventId: string;
  /** The parsed body. */
  event: { id: string; type: string; at: string; session: { id: string } };
  /** null when verifyWebhook accepted it; its error code when not. */
  refused: string | null;
  /** The status this receiver answered. */
  status: number;
}

/** Checks a signature; throws (with a `code`) when it does not hold. */
export type Verify = (body: string, header: string | undefined, secret: string) => Promise<unknown>;

export class WebhookReceiver {
  constructor(private readonly verify: Verify) {}

  readonly received: Received[] = [];
  private server: Server | null = null;
  /** The secret each path's hook signs with (set once the hook is created). */
  readonly secrets = new Map<string, string>();
  /** The status to answer (200 unless it says otherwise). */
  answer: (path: string, eventId: string, attempt: number, event: Received["event"]) => number = () => 200;
  /** Where a 3xx answer points (a path on this receiver). */
  redirectTo = "/redirected";

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        void this.take(req.url ?? "/", req.headers, Buffer.concat(chunks).toString("utf8")).then((status) => {
          const headers: Record<string, string> = { "content-type": "text/plain" };
          if (status >= 300 && status < 400) headers.location = this.redirectTo;
          res.writeHead(status, headers).end(status === 200 ? "ok" : "no");
        });
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private async take(path: string, headers: IncomingHttpHeaders, body: string): Promise<number> {
    const eventId = String(headers["ptybroker-event-id"] ?? "");
    const secret = this.secrets.get(path) ?? "";
    let refused: string | null = null;
    try {
      await this.verify(body, headers["ptybroker-signature"] as string | undefined, secret);
    } catch (error) {
      refused = (error as { code?: string }).code ?? String(error);
    }
    const event = JSON.parse(body) as Received["event"];
    const attempt = this.received.filter((r) => r.path === path && r.eventId === eventId).length + 1;
    const status = this.answer(path, eventId, attempt, event);
    this.received.push({ path, headers, body, at: Date.now(), eventId, event, refused, status });
    return status;
  }

  /** What `path` got for one session's events of `type`, in arrival order. */
  of(path: string, sessionId: string, type: string): Received[] {
    return this.received.filter((r) => r.path === path && r.event.session.id === sessionId && r.event.type === type);
  }

  /** Waits until `path` has got `count` POSTs of the session's `type` event. */
  waitFor(path: string, sessionId: string, type: string, count: number, deadlineMs: number): Promise<Received[]> {
    return until(
      () => {
        const got = this.of(path, sessionId, type);
        return got.length >= count ? got : undefined;
      },
      deadlineMs,
      `${count} × ${type} of ${sessionId} at ${path}`,
    );
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
