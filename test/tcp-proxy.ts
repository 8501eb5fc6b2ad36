// A TCP proxy for tests: forwards 127.0.0.1:<port> to 127.0.0.1:<targetPort>, byte for byte,
// and can cut every open connection at once (both sides reset), as a network failure would.
import { type Server, type Socket, connect, createServer } from "node:net";
import { Transform } from "node:stream";

export interface TcpProxy {
  port: number;
  /** http://127.0.0.1:<port>, for BROKER_URL. */
  url: string;
  /** Destroys every open connection on both sides (TCP reset), like a network failure. */
  cutAll(): void;
  /**
   * A network that silently stops delivering (no reset, no FIN): open connections stall and
   * new ones are accepted but never reach the target. `blackhole(false)` ends the outage: the
   * stalled connections are reset, as they would time out; new connections work again.
   * `{ strand: true }` leaves those that lost bytes in the blackhole (a request, a ping, output)
   * stalled instead, for good (until `close()`), as after a phone changes networks: such a
   * connection gets neither an answer nor a reset; idle ones are reset, found dead on return.
   */
  blackhole(on: boolean, options?: { strand?: boolean }): void;
  /**
   * Refuses the target: open connections are reset, and new ones are reset as they arrive,
   * until `refuse(false)`, like a server that is down and a host that answers with RST.
   */
  refuse(on: boolean): void;
  /**
   * Discards what clients send towards the target (the target never gets it) until
   * `swallow(false)`: frames "sent" in that time are lost, as in a link that dies with them.
   */
  swallow(on: boolean): void;
  /** Bytes discarded by `swallow` so far. */
  swallowed(): number;
  /** Bytes the target sent into a blackhole so far (lost on their way to the client). */
  blackholed(): number;
  /** Connections open now (client and upstream pairs). */
  connections(): number;
  /** Cuts every connection and stops listening. */
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket;
  gate: Transform;
}

/** Resets a socket (RST) when it is connected, otherwise just destroys it. */
function cut(socket: Socket): void {
  if (socket.destroyed) return;
  try {
    if (socket.readyState === "open" || socket.readyState === "readOnly" || socket.readyState === "writeOnly") {
      socket.resetAndDestroy();
      return;
    }
  } catch {
    // not resettable in its state: destroy below
  }
  socket.destroy();
}

export function startProxy(targetPort: number): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  /** Connections held during a blackhole, and forwarding pairs stalled by it. */
  const held = new Set<Socket>();
  /** Connections a blackhole left stalled when it ended (`strand`): reset only by close(). */
  const stranded = new Set<Socket>();
  /** Held connections that lost bytes in the blackhole, either way: the ones `strand` leaves stalled. */
  const caught = new Set<Socket>();
  /** In a blackhole a socket's bytes are read and dropped, as a dead network drops packets. */
  let fromTargetDropped = 0;
  const drop = (socket: Socket, pair: Socket[], fromTarget = false) => {
    socket.on("data", (chunk: Buffer) => {
      if (fromTarget) fromTargetDropped += chunk.byteLength;
      for (const s of pair) caught.add(s);
    });
    socket.resume();
  };
  let dark = false;
  let refusing = false;
  let swallowing = false;
  let swallowedBytes = 0;
  const server: Server = createServer((client) => {
    if (refusing) {
      client.on("error", () => undefined);
      cut(client);
      return;
    }
    if (dark) {
      held.add(client);
      client.on("error", () => undefined);
      client.on("close", () => held.delete(client));
      drop(client, [client]);
      return;
    }
    const upstream = connect({ host: "127.0.0.1", port: targetPort });
    const gate = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        if (swallowing) swallowedBytes += chunk.byteLength;
        done(null, swallowing ? undefined : chunk);
      },
    });
    const pair: Pair = { client, upstream, gate };
    pairs.add(pair);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    // A failure on either side resets the other; a clean close is passed on as a clean end;
    // neither crosses a blackhole (a stalled socket hears nothing from the other side).
    // The pair counts as open until both sides have closed.
    let open = 2;
    const dead = (socket: Socket) => held.has(socket) || stranded.has(socket);
    const closed = (other: Socket) => (hadError: boolean) => {
      if (dead(other)) {
        // nothing crosses
      } else if (hadError) cut(other);
      else if (!other.destroyed) other.end();
      if (--open === 0) pairs.delete(pair);
    };
    client.on("error", () => dead(upstream) || cut(upstream));
    upstream.on("error", () => dead(client) || cut(client));
    client.on("close", closed(upstream));
    upstream.on("close", closed(client));
    client.pipe(gate).pipe(upstream);
    upstream.pipe(client);
  });

  const cutAll = () => {
    for (const pair of [...pairs]) {
      pairs.delete(pair);
      cut(pair.client);
      cut(pair.upstream);
    }
  };

  const blackhole = (on: boolean, options: { strand?: boolean } = {}) => {
    dark = on;
    if (on) {
      for (const { client, upstream, gate } of pairs) {
        client.unpipe(gate);
        gate.unpipe(upstream);
        upstream.unpipe(client);
        drop(client, [client, upstream]);
        drop(upstream, [client, upstream], true);
        held.add(client);
        held.add(upstream);
      }
      return;
    }
    for (const socket of [...held]) {
      if (options.strand && caught.has(socket)) stranded.add(socket);
      else cut(socket);
    }
    held.clear();
    caught.clear();
  };

  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      resolve({
        port,
        url: `http://127.0.0.1:${port}`,
        cutAll,
        blackhole,
        refuse: (on: boolean) => {
          refusing = on;
          if (on) cutAll();
        },
        swallow: (on: boolean) => {
          swallowing = on;
        },
        swallowed: () => swallowedBytes,
        blackholed: () => fromTargetDropped,
        connections: () => pairs.size,
        close: () =>
          new Promise<void>((done) => {
            blackhole(false);
            for (const socket of [...stranded]) cut(socket);
            stranded.clear();
            refusing = false;
            cutAll();
            server.close(() => done());
          }),
      });
    });
  });
}
