// What a sandbox must not share with the runner's host (docs/security.md, "The sandbox"), attacked
// from inside sessions as a hostile tenant would, on a root runner of this suite's own with
// RUNNER_SANDBOX=bwrap: no file descriptor the runner inherited from whatever started it (a
// root-only 0600 file open on fd 200, as a lock, a log or a socket-activation fd would be) reaches
// a session; a session opens at most SESSION_PTYS pseudo-terminals (a devpts of its own with
// `max=`), so the host's pty pool (`kernel.pty.max`, shared by every sandbox) does not run out,
// and `script` and `tmux` still work; the host's /etc shows no user or group database but the
// sandbox's own (useradd's backups passwd- and group-, the shadow files, subuid and subgid are
// empty), so no file in /etc names another tenant; the tenants' users name no tenant in GECOS.
// This suite must run as root, and measures the host's pty count: it runs in project `e2e`,
// alone.
import { execFileSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tenantUserName } from "../runner/isolation/session-user.js";
import { Api, SuiteCleanup, TermClient, shellOutput } from "./harness.js";
import { startSuiteStack } from "./stack-kit.js";

const cleanup = new SuiteCleanup();
const scratch = mkdtempSync(join(tmpdir(), "ptybroker-sandbox-host-test-"));
const workspace = join(scratch, "workspace");
cleanup.folder(scratch);
/** The runner's SESSION_PTYS here (not the default 64, to see that the variable is what counts). */
const PTYS = 24;
/** Tenants of this suite only, with names no other file in /etc could contain by chance. */
const RED = "hostwall-red";
const BLUE = "hostwall-blue";
/** The runner's inherited descriptor, and the root-only file it is open on. */
const INHERITED_FD = 200;
const rootOnly = join(scratch, "root-only.log");
let heldFd: number | undefined;
let red: Api;
let blue: Api;
let edgeUrl: string;
let runnerPid: number;

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error("test/sandbox-host.test.ts must run as root (sandboxes, the runner's users)");
  writeFileSync(rootOnly, "", { mode: 0o600 });
  heldFd = openSync(rootOnly, "a");
  const stack = await startSuiteStack(
    {
      apiKeys: `${RED}:hostwall-red-key,${BLUE}:hostwall-blue-key`,
      runners: [
        {
          env: { RUNNER_WORKSPACE: workspace, TENANT_DISK_MIB: "64", RUNNER_SANDBOX: "bwrap", SESSION_PTYS: String(PTYS) },
          fds: { [INHERITED_FD]: heldFd },
        },
      ],
    },
    cleanup,
  );
  edgeUrl = stack.edge.url;
  runnerPid = stack.runners[0].pid;
  red = new Api(edgeUrl, "hostwall-red-key");
  blue = new Api(edgeUrl, "hostwall-blue-key");
}, 120_000);

afterAll(() => {
  if (heldFd !== undefined) closeSync(heldFd);
});

/** A bash session (no profile) with a client attached; purged after the file. */
async function shell(api: Api, body: Record<string, unknown> = {}): Promise<{ id: string; client: TermClient }> {
  const s = await api.create({ command: "/bin/bash", args: ["--norc", "--noprofile"], ...body });
  cleanup.session(api, s.id);
  const client = cleanup.client(new TermClient(edgeUrl, s.id, api.key as string));
  await client.opened;
  return { id: s.id, client };
}

const run = shellOutput;


describe("nothing inherited", () => {
  it("the runner holds fd 200 on a root-only file; no session, terminal or pipe, has it", async () => {
    // The premise: the runner itself has the descriptor, as a service manager would have left it.
    expect(readlinkSync(`/proc/${runnerPid}/fd/${INHERITED_FD}`)).toBe(rootOnly);

    const { client } = await shell(red);
    expect(await run(client, `ls /proc/self/fd | tr '\\n' ' '`)).toBe("0 1 2 3 ");
    const tries = await run(client, `(echo pwned >&${INHERITED_FD}) 2>&1 | sed 's/^.*: //'; (echo pwned > /proc/self/fd/${INHERITED_FD}) 2>&1 | sed 's/^.*: //'`);
    expect(tries).toBe("Bad file descriptor\nNo such file or directory\n");

    const piped = await blue.create({ pty: false, command: "/bin/sh", args: ["-c", `ls /proc/self/fd | tr '\\n' ' '; echo pwned >&${INHERITED_FD} && echo wrote`] });
    cleanup.session(blue, piped.id);
    await blue.ended(piped.id);
    const output = String((await blue.request("GET", `/v1/sessions/${piped.id}/output?from=0`)).body);
    expect(output).toContain("0 1 2 3 ");
    expect(output).not.toContain("wrote");
    expect(readFileSync(rootOnly, "utf8")).toBe("");
  });
});

describe("a pty bound per sandbox", () => {
  it(`opens at most SESSION_PTYS (${PTYS}) ptys, the host's count grows by no more, and script and tmux still work`, async () => {
    const { client } = await shell(red);
    const hostBefore = Number(readFileSync("/proc/sys/kernel/pty/nr", "utf8"));
    // Opens ptys until the kernel refuses, says how many and why, and holds them until told.
    const opener = [
      "import os, sys, errno",
      "held = []",
      "why = 'none'",
      "while len(held) < 200:",
      "    try: held.append(os.openpty())",
      "    except OSError as e: why = errno.errorcode[e.errno]; break",
      "print('opened=%d why=%s' % (len(held), why), flush=True)",
      "sys.stdin.readline()",
    ].join("\n");
    client.send(`echo ${Buffer.from(opener).toString("base64")} | base64 -d > /tmp/opener.py; python3 /tmp/opener.py\n`);
    await client.waitForOutput(/opened=\d+ why=\w+\r\n/, 15_000);
    const [, opened, why] = /opened=(\d+) why=(\w+)/.exec(client.text) ?? [];
    const hostHolding = Number(readFileSync("/proc/sys/kernel/pty/nr", "utf8"));
    client.send("\n");
    expect.soft({ opened: Number(opened), why }).toEqual({ opened: PTYS, why: "ENOSPC" });
    expect.soft(hostHolding - hostBefore).toBeLessThanOrEqual(PTYS);
    // Closed again: a terminal inside still opens.
    expect(await run(client, "script -qec 'tty' /dev/null")).toMatch(/^\/dev\/pts\/\d+\r?\n$/);
    expect(await run(client, "tmux -f /dev/null -S /tmp/t new-session -d 'sleep 30' && tmux -S /tmp/t display -p '#{pane_tty}'; tmux -S /tmp/t kill-server")).toMatch(
      /^\/dev\/pts\/\d+\n$/,
    );
    // The sandbox's own devpts, as bubblewrap mounts it (nosuid, noexec) and with its bound.
    expect(await run(client, "grep -o ' /dev/pts .*' /proc/self/mountinfo")).toMatch(new RegExp(`^ /dev/pts rw,nosuid,noexec,\\S+ - devpts devpts rw,.*max=${PTYS}\\b`));
    console.info(`sandbox-host: ${opened} ptys opened (${why}); the host's count went ${hostBefore} -> ${hostHolding}`);
  });
});

describe("a curated /etc", () => {
  it("shows no backup, shadow or subordinate-id file of the host, and no file in /etc names another tenant", async () => {
    // blue's user first, then red's: useradd's backup (passwd-) then holds blue's entry.
    const b = await shell(blue);
    expect(await run(b.client, "echo ready")).toBe("ready\n");
    const { client } = await shell(red);
    const files = ["passwd-", "group-", "shadow", "shadow-", "gshadow", "gshadow-", "subuid", "subuid-", "subgid", "subgid-"];
    // Each absent, or there and empty.
    const seen = await run(client, `for f in ${files.join(" ")}; do if [ -s /etc/$f ]; then echo "$f has $(wc -c < /etc/$f) bytes"; fi; done; echo checked`);
    expect.soft(seen).toBe("checked\n");
    expect.soft(await run(client, `grep -rlI -e ${BLUE} -e ${RED} /etc 2>/dev/null; echo searched`)).toBe("searched\n");
    // The host's users: GECOS names no tenant (and the home's folder name is the sandbox's business).
    for (const tenant of [RED, BLUE]) {
      const entry = execFileSync("getent", ["passwd", tenantUserName(tenant)], { encoding: "utf8" }).trim().split(":");
      expect.soft(entry[4]).toBe("ptybroker tenant");
    }
  });
});

