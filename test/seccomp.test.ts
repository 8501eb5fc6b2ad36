// The sandbox's seccomp filter (docs/security.md, "The seccomp filter"; runner/isolation/
// seccomp-profile.py), tried from inside sessions on the shared stack's root runner: no new user
// namespace (`unshare -Ur`), no keyring call (add_key, keyctl), so a key the test puts in the
// runner's session keyring is not readable from a session, and no TIOCSTI on the session's own
// terminal. And what must still work there: a login shell, vim, tmux, python3, gcc, and gdb
// running its own child under ptrace. Runs as root (CI does): the keyring check starts a runner
// of its own in a session keyring that holds a root key.
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { Api, SuiteCleanup, TermClient, onSharedStack, shellOutput, startSuiteStack } from "./harness.js";

const suite = onSharedStack({ clients: "close" });

/** python3 (the host's, bound read-only in every sandbox) calling a syscall through ctypes: prints "<name> <result> <errno>". */
function pySyscall(name: string, nr: number, args: string): string {
  return `/usr/bin/python3 -c 'import ctypes;l=ctypes.CDLL(None,use_errno=True);l.syscall.restype=ctypes.c_long;r=l.syscall(${nr},${args});print("${name}",r,ctypes.get_errno())'`;
}
const SYS_ADD_KEY = 248;
const SYS_KEYCTL = 250;
const KEYCTL_READ = 11;
const KEYCTL_JOIN_SESSION_KEYRING = 1;
const KEY_SPEC_SESSION_KEYRING = -3;
const EPERM = 1;

let client: TermClient;

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error("test/seccomp.test.ts must run as root (the runner's keyring)");
  const s = await suite.session({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
  client = suite.connect(s.id);
  await client.opened;
}, 30_000);

const run = (command: string, deadlineMs = 20_000) => shellOutput(client, command, deadlineMs);

describe("refused inside a session", () => {
  it("makes no user namespace: unshare -Ur fails with EPERM", async () => {
    const out = await run("unshare -Ur true; echo unshare=$?");
    expect(out).toContain("unshare=1");
    expect(out).toMatch(/Operation not permitted/);
  });

  it("makes no keyring call: add_key and keyctl get EPERM", async () => {
    const out = await run(
      [
        pySyscall("add_key", SYS_ADD_KEY, `b"user",b"ptyb-test",b"x",1,${KEY_SPEC_SESSION_KEYRING}`),
        pySyscall("keyctl", SYS_KEYCTL, `0,${KEY_SPEC_SESSION_KEYRING},0`),
      ].join("; "),
    );
    expect(out).toContain(`add_key -1 ${EPERM}`);
    expect(out).toContain(`keyctl -1 ${EPERM}`);
  });

  describe("a key in the runner's session keyring", () => {
    // A runner of its own, started as a service manager starts a service: through a wrapper that
    // joins a fresh session keyring, puts a root key in it and execs the runner, which every
    // session it starts inherits.
    const cleanup = new SuiteCleanup();
    const scratch = mkdtempSync(join(tmpdir(), "ptybroker-seccomp-test-"));
    cleanup.folder(scratch);
    const secretText = `ptyb-secret-${randomBytes(6).toString("hex")}`;
    const description = `ptyb-seccomp-test-${randomBytes(4).toString("hex")}`;
    const serialFile = join(scratch, "serial");
    let own: TermClient;

    beforeAll(async () => {
      const wrapper = `import ctypes,os,sys;l=ctypes.CDLL(None,use_errno=True);l.syscall.restype=ctypes.c_long
assert l.syscall(${SYS_KEYCTL},${KEYCTL_JOIN_SESSION_KEYRING},None)>0
p=sys.argv[2].encode();r=l.syscall(${SYS_ADD_KEY},b"user",sys.argv[1].encode(),p,len(p),${KEY_SPEC_SESSION_KEYRING});assert r>0
open(sys.argv[3],"w").write(str(r));os.execv(sys.argv[4],sys.argv[4:])`;
      const stack = await startSuiteStack(
        {
          apiKeys: "keys:seccomp-keys-key",
          runners: [{ wrap: ["/usr/bin/python3", "-c", wrapper, description, secretText, serialFile], env: { RUNNER_WORKSPACE: join(scratch, "workspace"), RUNNER_SANDBOX: "bwrap" } }],
        },
        cleanup,
      );
      const api = new Api(stack.edge.url, "seccomp-keys-key");
      const s = await api.create({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
      cleanup.session(api, s.id);
      own = cleanup.client(new TermClient(stack.edge.url, s.id, api.key as string));
      await own.opened;
    }, 120_000);

    it("is not readable from a session, by serial or in /proc/keys", async () => {
      const serial = Number(readFileSync(serialFile, "utf8"));
      expect(serial).toBeGreaterThan(0);
      const out = await shellOutput(
        own,
        [
          `/usr/bin/python3 -c 'import ctypes;l=ctypes.CDLL(None,use_errno=True);l.syscall.restype=ctypes.c_long;b=ctypes.create_string_buffer(256);r=l.syscall(${SYS_KEYCTL},${KEYCTL_READ},${serial},b,256);print("read",r,ctypes.get_errno(),b.value.decode())'`,
          "cat /proc/keys",
        ].join("; "),
        20_000,
      );
      expect(out).not.toContain(secretText);
      expect(out).toContain(`read -1 ${EPERM}`);
      expect(out).not.toContain(description);
    });
  });

  it("injects nothing into its terminal: TIOCSTI fails", async () => {
    const out = await run(`perl -e 'my $c = "x"; if (ioctl(STDIN, 0x5412, $c)) { print "tiocsti=ok\\n" } else { print "tiocsti=$!\\n" }'`);
    expect(out).toMatch(/tiocsti=Operation not permitted/);
  });
});

describe("still works inside a session", () => {
  it("a login shell, python3 and vim", async () => {
    const out = await run("bash -lc 'echo login=$0'; python3 -c 'print(\"py\", 6*7)'; vim -u NONE -c q; echo vim=$?");
    expect(out).toContain("login=bash");
    expect(out).toContain("py 42");
    expect(out).toContain("vim=0");
  });

  it("tmux starts a server and kills it", async () => {
    const out = await run("tmux -S /tmp/t new-session -d 'sleep 60' && tmux -S /tmp/t has-session && echo tmux=up; tmux -S /tmp/t kill-server; echo kill=$?");
    expect(out).toContain("tmux=up");
    expect(out).toContain("kill=0");
  });

  it("gcc compiles and runs a hello world", async () => {
    const out = await run(
      "printf '#include <stdio.h>\\nint main(void){puts(\"hello from gcc\");return 0;}\\n' > /tmp/h.c && gcc -o /tmp/h /tmp/h.c && /tmp/h",
      60_000,
    );
    expect(out).toContain("hello from gcc");
  });

  it("gdb runs its own child under ptrace", async () => {
    const out = await run("gdb -q -nx -batch -ex run --args /bin/true 2>&1; echo gdb=$?", 60_000);
    expect(out).toMatch(/exited normally/);
    expect(out).toContain("gdb=0");
  });
});
