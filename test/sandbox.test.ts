// A session is a sandbox (docs/security.md, "The sandbox"), attacked from inside sessions through
// the public API on a root runner with RUNNER_SANDBOX=bwrap (the default), as a hostile tenant
// would: a request's environment never runs anything as root; nothing on the runner's machine is
// reachable (Redis, the edge, any loopback listener), with network egress or none, while egress
// reaches a host outside (a server in a network namespace of the test's own, through a veth
// pair); a session sees only its own processes, users, tmp files and no tenant's or session's
// name; limits (pids, memory, disk) hold and a second tenant keeps echoing meanwhile. This
// suite must run as root (CI does): it compiles a preload, makes a network namespace, and reads
// the runner's files.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedis } from "./redis-server.js";
import { Api, SuiteCleanup, TermClient, alive, hostPid, shellOutput, startSuiteStack, until } from "./harness.js";

const cleanup = new SuiteCleanup();
const scratch = mkdtempSync(join(tmpdir(), "ptybroker-sandbox-test-"));
const workspace = join(scratch, "workspace");
cleanup.folder(scratch);
const DISK_MIB = 64;
let acme: Api;
let globex: Api;
let edgeUrl: string;
let redisPort: number;

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error("test/sandbox.test.ts must run as root (sandboxes, network namespaces, cgroups)");
  const redis = await startRedis();
  cleanup.redises.add(redis);
  redisPort = redis.port;
  const stack = await startSuiteStack(
    {
      apiKeys: "acme:sandbox-acme-key,globex:sandbox-globex-key",
      runners: [{ env: { RUNNER_WORKSPACE: workspace, TENANT_DISK_MIB: String(DISK_MIB), RUNNER_SANDBOX: "bwrap" } }],
    },
    cleanup,
  );
  edgeUrl = stack.edge.url;
  acme = new Api(edgeUrl, "sandbox-acme-key");
  globex = new Api(edgeUrl, "sandbox-globex-key");
}, 120_000);

/** A bash session (no profile) with a client attached; purged after the file. */
async function shell(api: Api, body: Record<string, unknown> = {}): Promise<{ id: string; client: TermClient }> {
  const s = await api.create({ command: "/bin/bash", args: ["--norc", "--noprofile"], ...body });
  cleanup.session(api, s.id);
  const client = cleanup.client(new TermClient(edgeUrl, s.id, api.key as string));
  await client.opened;
  return { id: s.id, client };
}

/** What `command` prints in the session (test/term-client.ts, shellOutput). */
const run = shellOutput;

/** Whether a TCP connect from the session to host:port succeeds ("open") or not ("refused"). */
function probe(host: string, port: number): string {
  return `(timeout 5 bash -c 'exec 3<>/dev/tcp/${host}/${port}' 2>/dev/null && echo "${host}:${port} open" || echo "${host}:${port} refused")`;
}


describe("nothing from the request runs as root", () => {
  const evil = join(scratch, "evil");
  const marker = join(scratch, "root-marker");

  beforeAll(() => {
    // A preload that leaves a mark when it runs as root, and scripts that do the same.
    execFileSync("mkdir", ["-p", evil]);
    writeFileSync(
      join(evil, "evil.c"),
      `#include <stdio.h>\n#include <unistd.h>\n__attribute__((constructor)) static void hit(void) {\n  if (geteuid() == 0) { FILE *f = fopen("${marker}", "a"); if (f) { fprintf(f, "root %d\\n", getpid()); fclose(f); } }\n}\n`,
    );
    execFileSync("cc", ["-shared", "-fPIC", "-o", join(evil, "evil.so"), join(evil, "evil.c")]);
    execFileSync("cp", [join(evil, "evil.so"), join(evil, "libc.so.6")]);
    writeFileSync(join(evil, "env.sh"), `[ "$(id -u)" = 0 ] && echo "root env-file" >> ${marker}\n`, { mode: 0o755 });
    for (const tool of ["sh", "bash", "setpriv", "env", "bwrap", "mount", "id", "cat"]) {
      writeFileSync(join(evil, tool), `#!/bin/sh\n[ "$(/usr/bin/id -u)" = 0 ] && echo "root path ${tool}" >> ${marker}\nexec /usr/bin/${tool} "$@"\n`, { mode: 0o755 });
    }
    execFileSync("chmod", ["-R", "a+rX", evil]);
    execFileSync("chmod", ["a+x", scratch]);
  });

  const hostile = () => ({
    LD_PRELOAD: join(evil, "evil.so"),
    LD_LIBRARY_PATH: evil,
    BASH_ENV: join(evil, "env.sh"),
    ENV: join(evil, "env.sh"),
    GCONV_PATH: evil,
    PATH: `${evil}:/usr/bin:/bin`,
  });

  it("on create: the variables reach the session's command as the user, never a step that runs as root", async () => {
    const s = await acme.create({ command: "/bin/sh", args: ["-c", 'echo "uid=$(id -u) preload=$LD_PRELOAD"'], env: hostile() });
    cleanup.session(acme, s.id);
    expect(await acme.ended(s.id)).toMatchObject({ status: "exited", exitCode: 0 });
    const output = (await acme.request("GET", `/v1/sessions/${s.id}/output?from=0`)).body as unknown;
    expect(String(output)).toMatch(new RegExp(`uid=[1-9]\\d* preload=${join(evil, "evil.so")}`));
    expect(existsSync(marker) ? readFileSync(marker, "utf8") : "").toBe("");
  });

  it("on exec, as a pipe process", async () => {
    const res = await acme.request("POST", "/v1/exec", { command: "/bin/sh", args: ["-c", "id -u"], env: hostile() });
    expect(res.status).toBe(200);
    expect(res.body, JSON.stringify(res.body)).toMatchObject({ exitCode: 0 });
    expect(existsSync(marker) ? readFileSync(marker, "utf8") : "").toBe("");
  });
});

describe("nothing on the runner's machine is reachable", () => {
  const ns = `ptyb-test-${process.pid}`;
  let server: ReturnType<typeof spawn> | undefined;
  let listener: ReturnType<typeof spawn> | undefined;
  const LISTENER_PORT = 18_000 + (process.pid % 1000);

  beforeAll(async () => {
    // A host outside the runner's machine: a server in a namespace of its own, behind a veth pair
    // (198.18.0.0/15, the benchmarking range, which no default deny list names).
    const ip = (...args: string[]) => execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
    ip("netns", "add", ns);
    cleanup.last(() => void spawnSync("ip", ["netns", "delete", ns]));
    ip("link", "add", `${ns.slice(-6)}a`, "type", "veth", "peer", "name", `${ns.slice(-6)}b`, "netns", ns);
    ip("addr", "add", "198.18.7.1/30", "dev", `${ns.slice(-6)}a`);
    ip("link", "set", `${ns.slice(-6)}a`, "up");
    ip("netns", "exec", ns, "ip", "addr", "add", "198.18.7.2/30", "dev", `${ns.slice(-6)}b`);
    ip("netns", "exec", ns, "ip", "link", "set", `${ns.slice(-6)}b`, "up");
    ip("netns", "exec", ns, "ip", "link", "set", "lo", "up");
    const serve = (where: string[], host: string, port: number, text: string) => {
      const child = spawn(where[0], [...where.slice(1), process.execPath, "-e", `require("net").createServer((s) => s.end(${JSON.stringify(text)})).listen(${port}, ${JSON.stringify(host)}, () => console.log("listening"))`], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      cleanup.last(() => void child.kill("SIGKILL"));
      return new Promise<ReturnType<typeof spawn>>((resolve) => child.stdout?.once("data", () => resolve(child)));
    };
    server = await serve(["ip", "netns", "exec", ns], "198.18.7.2", 7777, "hello from outside\n");
    listener = await serve(["env"], "0.0.0.0", LISTENER_PORT, "host listener\n");
  });

  afterAll(() => {
    server?.kill("SIGKILL");
    listener?.kill("SIGKILL");
  });

  it.each(["egress", "none"] as const)("with network %s: Redis, the edge and a loopback listener are refused", async (network) => {
    const { client } = await shell(acme, { network });
    const edgePort = Number(new URL(edgeUrl).port);
    const checks = [
      ["127.0.0.1", redisPort],
      ["127.0.0.1", edgePort],
      ["127.0.0.1", LISTENER_PORT],
      ["10.0.2.2", LISTENER_PORT], // slirp's way to the host's loopback
      ["198.18.7.1", LISTENER_PORT], // an address of the runner's host
    ] as const;
    const out = await run(client, checks.map(([h, p]) => probe(h, p)).join("; "));
    expect(out).toBe(checks.map(([h, p]) => `${h}:${p} refused\n`).join(""));
    const outside = await run(client, `(timeout 5 cat < /dev/tcp/198.18.7.2/7777) 2>/dev/null || echo unreachable`);
    expect(outside).toBe(network === "egress" ? "hello from outside\n" : "unreachable\n");
  });
});

describe("a session sees nothing of other tenants or sessions", () => {
  it("ps shows its own processes; passwd names root and its user; no path names a tenant or session", async () => {
    const other = await shell(globex);
    await run(other.client, "sleep 300 & echo started");
    const { id, client } = await shell(acme);
    const ps = await run(client, "ps -e -o pid=,comm= | sort -n");
    // bubblewrap's init, the shell, ps and sort: nothing of the runner, nor of globex's session.
    expect(ps.split("\n").filter(Boolean).map((row) => row.trim().split(/\s+/)[1]).sort()).toEqual(["bash", "bwrap", "ps", "sort"]);
    const passwd = await run(client, "cut -d: -f1,3 /etc/passwd; echo; cut -d: -f1 /etc/group");
    const user = (await run(client, "id -un")).trim();
    const uid = (await run(client, "id -u")).trim();
    expect(passwd).toBe(`root:0\n${user}:${uid}\n\nroot\n${user}\n`);
    expect(await run(client, "hostname")).toBe("sandbox\n");
    const seen = await run(client, "cat /proc/self/cgroup /proc/self/mountinfo; hostname; echo $HOME; pwd");
    for (const name of ["acme", "globex", id, other.id]) expect(seen).not.toContain(name);
  });

  it("answers the same for a command in another tenant's folder whether or not it exists (no oracle)", async () => {
    const g = await shell(globex);
    expect(await run(g.client, "printf '#!/bin/sh\\necho globex\\n' > ~/tool.sh; chmod 755 ~/tool.sh; ~/tool.sh")).toBe("globex\n");
    const outcomes: unknown[] = [];
    for (const command of [join(workspace, "globex", "tool.sh"), join(workspace, "globex", "missing.sh")]) {
      const s = await acme.create({ command });
      cleanup.session(acme, s.id);
      const done = await acme.ended(s.id);
      const output = String((await acme.request("GET", `/v1/sessions/${s.id}/output?from=0`)).body).replace(command, "<command>");
      outcomes.push({ exitCode: done.exitCode, output });
    }
    expect(outcomes).toEqual([
      { exitCode: 127, output: "ptybroker: <command>: no such file or directory\r\n" },
      { exitCode: 127, output: "ptybroker: <command>: no such file or directory\r\n" },
    ]);
  });

  it("keeps /tmp and /dev/shm private to the session, and the workspace shared by the tenant's own sessions", async () => {
    const a = await shell(acme);
    expect(await run(a.client, "umask 022; echo a-tmp > /tmp/left; echo a-shm > /dev/shm/left; echo a-ws > ~/shared; ls /tmp /dev/shm")).toBe("/dev/shm:\nleft\n\n/tmp:\nleft\n");
    const b = await shell(globex);
    expect(await run(b.client, "ls -A /tmp /dev/shm; cat ~/shared 2>&1 | sed 's/^.*: //'")).toBe("/dev/shm:\n\n/tmp:\nNo such file or directory\n");
    const again = await shell(acme);
    expect(await run(again.client, "ls -A /tmp /dev/shm; cat ~/shared")).toBe("/dev/shm:\n\n/tmp:\na-ws\n");
  });
});

describe("limits", () => {
  /** globex's keystroke echo, timed: it must keep answering while acme's session is at a limit. */
  async function echoes(client: TermClient, label: string): Promise<number> {
    const start = performance.now();
    expect(await run(client, `echo ${label}`, 10_000)).toBe(`${label}\n`);
    return performance.now() - start;
  }

  it("stops a fork loop at pids, and the session and its neighbour go on", async () => {
    const neighbour = await shell(globex);
    const idle = await echoes(neighbour.client, "idle");
    const { client } = await shell(acme, { limits: { pids: 32 } });
    // Forks until fork fails (each child sleeps), reports how many it got, then ends them all.
    const forker = [
      "import os, signal, time",
      "kids = []",
      "while len(kids) < 200:",
      "    try: pid = os.fork()",
      "    except OSError: break",
      "    if pid == 0: time.sleep(60); os._exit(0)",
      "    kids.append(pid)",
      "print('forked=%d' % len(kids))",
      "for k in kids: os.kill(k, signal.SIGKILL)",
      "for k in kids: os.waitpid(k, 0)",
    ].join("\n");
    const encoded = Buffer.from(forker).toString("base64");
    const out = await run(client, `echo ${encoded} | base64 -d > /tmp/forker.py; python3 /tmp/forker.py; echo alive`);
    const forked = Number(/forked=(\d+)/.exec(out)?.[1]);
    expect(forked).toBeGreaterThan(0);
    expect(forked).toBeLessThan(32);
    expect(out).toBe(`forked=${forked}\nalive\n`);
    const busy = await echoes(neighbour.client, "during");
    console.info(`sandbox: fork loop stopped at ${forked} processes; neighbour echo ${idle.toFixed(1)} ms idle, ${busy.toFixed(1)} ms after`);
  });

  it("ends a session that allocates past memoryMiB with reason oom", async () => {
    const neighbour = await shell(globex);
    const s = await acme.create({ command: "/usr/bin/python3", args: ["-c", "b = b'x' * (2 << 30); print('allocated')"], limits: { memoryMiB: 256 } });
    cleanup.session(acme, s.id);
    expect(s).toMatchObject({ limits: { memoryMiB: 256 } });
    const done = await acme.ended(s.id);
    expect(done).toMatchObject({ status: "exited", reason: "oom", signal: "SIGKILL", exitCode: null, sandbox: "bwrap" });
    expect(done.limits).toMatchObject({ memoryMiB: 256 });
    await echoes(neighbour.client, "after-oom");
  });

  it("gives ENOSPC past TENANT_DISK_MIB inside, and the host and the neighbour do not notice", async () => {
    const neighbour = await shell(globex);
    const { client } = await shell(acme);
    const out = await run(client, `dd if=/dev/zero of=~/fill bs=1M count=${DISK_MIB * 2} 2>&1 | grep -o 'No space left on device' | head -1; rm -f ~/fill; echo done`, 60_000);
    expect(out).toBe("No space left on device\ndone\n");
    await echoes(neighbour.client, "after-disk");
  });
});

describe("a sandboxed terminal works as a terminal", () => {
  it("keeps job control: Ctrl+C, Ctrl+Z and fg", async () => {
    const { client } = await shell(acme);
    // The shell's prompt first: the terminal echoes typed keys before bash runs, and a Ctrl+C that
    // comes before bash is interactive ends it (the session step gives Ctrl+C its default back).
    await client.waitForOutput(/\$ $/);
    client.send("sleep 100\n");
    await until(() => client.text.includes("sleep 100\r\n"), 5000, "the sleep to start");
    client.send("\x03");
    // The shell answers at once: the sleep is gone, the shell is not.
    await client.waitForOutput("^C");
    expect(await run(client, "echo back; jobs | wc -l", 5000)).toBe("back\n0\n");
    client.send("sleep 1; echo slept-through\n");
    await until(() => client.text.includes("echo slept-through\r\n"), 5000, "the sleep to start");
    client.send("\x1a");
    await client.waitForOutput(/Stopped\s+sleep 1/);
    client.send("fg\n");
    await client.waitForOutput("slept-through\r\n");
    expect(await run(client, "jobs | wc -l")).toBe("0\n");
  });

  it("runs vim and top full-screen, and a login shell's run and screen", async () => {
    const s = await acme.create({});
    cleanup.session(acme, s.id);
    expect(await acme.run(s.id, "echo $HOME; id -un | grep -c ptyb-")).toMatchObject({ exitCode: 0, output: "/workspace\n1\n" });
    const client = cleanup.client(new TermClient(edgeUrl, s.id, acme.key as string));
    await client.opened;
    client.send("vim -u NONE ~/v.txt\r");
    await until(async () => (await acme.screen(s.id)).lines.some((line) => line.startsWith("~")), 10_000, "vim to draw");
    client.send("isandboxed vim\x1b:wq\r");
    await until(async () => (await acme.runRequest(s.id, "true")).status === 200, 10_000, "vim to quit");
    expect(await acme.run(s.id, "cat ~/v.txt")).toMatchObject({ exitCode: 0, output: "sandboxed vim\n" });
    client.send("top\r");
    await until(async () => (await acme.screen(s.id)).lines.some((line) => /load average/.test(line)), 10_000, "top to draw");
    client.send("q");
    await until(async () => (await acme.runRequest(s.id, "true")).status === 200, 10_000, "top to quit");
  });

  it("runs pty: false sessions, and ends a setsid -f escapee with the session", async () => {
    const piped = await acme.create({ pty: false, command: "/bin/sh", args: ["-c", "echo piped; id -u"] });
    cleanup.session(acme, piped.id);
    expect(await acme.ended(piped.id)).toMatchObject({ status: "exited", exitCode: 0, sandbox: "bwrap" });
    const { id, client } = await shell(acme);
    const inner = Number((await run(client, "setsid -f sh -c 'echo $$ > /tmp/pid; exec sleep 300'; until [ -s /tmp/pid ]; do sleep 0.05; done; cat /tmp/pid")).trim());
    const leader = (await acme.get(id)).pid as number;
    const escapee = await until(() => hostPid(leader, inner), 5000, "the escapee on the host");
    cleanup.strayProcess(escapee, "sleep 300");
    expect(alive(escapee)).toBe(true);
    expect((await acme.request("DELETE", `/v1/sessions/${id}`)).status).toBe(200);
    await until(() => !alive(escapee), 5000, "the escapee to end with its session");
  });
});

describe("local state", () => {
  it("keeps the runner's state folder and the workspace root out of every session's reach", async () => {
    expect(statSync(join(workspace, ".ptybroker")).mode & 0o777).toBe(0o700);
    expect(statSync(join(workspace, ".disks")).mode & 0o777).toBe(0o700);
    const { client } = await shell(acme);
    expect(await run(client, `ls ${workspace} 2>&1 | sed 's/^.*: //'; ls -A / | tr '\\n' ' '`)).toBe(
      "No such file or directory\nbin dev etc lib lib64 opt proc run sbin tmp usr var workspace ",
    );
  });
});
