// start-checks.ts: every Worker variable of shared/worker-vars.ts that is set reaches the edge
// (the list is the Worker's own `Env`, so a variable the Worker reads cannot be left out), and a
// port that is taken is said to be, with what answers there. test/start.test.ts runs npm start.
import { readFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { WORKER_VARIABLE_NAMES } from "../shared/worker-vars.js";
import { edgeVariables, portTaken } from "./start-checks.js";
import { freePort, manage, ROOT, waitForHealth } from "./stack.js";

describe("edgeVariables", () => {
  it("passes every Worker variable that is set, but the four start.ts and stack.ts set themselves", () => {
    const env = Object.fromEntries(WORKER_VARIABLE_NAMES.map((name) => [name, `value of ${name}`]));
    const vars = edgeVariables({ ...env, PATH: "/usr/bin", UNRELATED: "x" });
    const own = ["API_KEYS", "RUNNER_TOKEN", "TOKEN_SECRET", "EDGE_INSTANCE"];
    expect(Object.keys(vars).sort()).toEqual(WORKER_VARIABLE_NAMES.filter((name) => !own.includes(name)).sort());
    for (const [name, value] of Object.entries(vars)) expect(value).toBe(`value of ${name}`);
    expect(vars.RUNNER_SECRET).toBe("value of RUNNER_SECRET");
    expect(vars.MAX_OUTPUT_READS).toBe("value of MAX_OUTPUT_READS");
  });

  it("leaves out what is unset or empty", () => {
    expect(edgeVariables({ LOG_LEVEL: "", CORS_ORIGINS: "*" })).toEqual({ CORS_ORIGINS: "*" });
  });

  it("every variable is in the README's configuration table", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const table = readme.slice(readme.indexOf("## Configuration"), readme.indexOf("Runner (environment):"));
    const missing = WORKER_VARIABLE_NAMES.filter((name) => !table.includes(`| \`${name}\``));
    expect(missing).toEqual([]);
  });
});

describe("portTaken", () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy(); // fetch keeps its connection alive
    await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
  });
  const sockets: Socket[] = [];
  const listen = async (server: Server): Promise<number> => {
    servers.push(server);
    server.on("connection", (socket: Socket) => sockets.push(socket));
    const port = await freePort();
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
    return port;
  };

  it("null for a free port", async () => {
    expect(await portTaken(await freePort())).toBeNull();
  });

  it("names an edge that answers /healthz as one, and anything else as another program", async () => {
    const edge = await listen(createHttpServer((_req, res) => res.setHeader("content-type", "application/json").end('{"ok":true}')));
    expect(await portTaken(edge)).toBe("a ptybroker edge answers there (another npm start?)");
    const other = await listen(createServer((socket) => socket.end("SSH-2.0-x\r\n")));
    expect(await portTaken(other)).toBe("another program listens there");
  });
});

describe("waitForHealth (stack.ts)", () => {
  it("takes only an edge that answers /healthz with its own instance name", async () => {
    const port = await freePort();
    let instance: string | undefined = "another";
    const server = createHttpServer((_req, res) => res.setHeader("content-type", "application/json").end(JSON.stringify({ ok: true, instance })));
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
    // A process standing in for the edge that has not exited; stopped below.
    const proc = manage("sleep", ["60"], process.env);
    try {
      const url = `http://127.0.0.1:${port}`;
      await expect(waitForHealth(url, proc, 1500, "mine")).rejects.toThrow("edge not ready after 1500 ms");
      instance = undefined; // an edge that names no instance (one from before EDGE_INSTANCE)
      await expect(waitForHealth(url, proc, 1500, "mine")).rejects.toThrow("edge not ready after 1500 ms");
      instance = "mine";
      await expect(waitForHealth(url, proc, 10_000, "mine")).resolves.toBeUndefined();
    } finally {
      await proc.stop();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
