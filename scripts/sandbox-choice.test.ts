// npm start's sandbox decision: which facts give which runner environment and which warning.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { chooseSandbox, findProgram } from "./sandbox-choice.js";

const RULE = "!".repeat(78);
const RISK = [
  "!! Every session is a shell on this machine itself: it sees its processes and the files it may",
  "!! read, and reaches every service on 127.0.0.1 (the edge, Redis, databases). Local use only.",
];

describe("chooseSandbox", () => {
  it("root with bwrap, slirp4netns and nft: the runner's default sandbox, nothing added, no warning", () => {
    expect(chooseSandbox({ asked: undefined, root: true, missing: [] })).toEqual({ sandbox: "bwrap", env: {}, warning: undefined });
    expect(chooseSandbox({ asked: "", root: true, missing: [] })).toEqual({ sandbox: "bwrap", env: {}, warning: undefined });
  });

  it("root without bwrap: RUNNER_SANDBOX=none and a warning naming what is missing and the command that installs it", () => {
    expect(chooseSandbox({ asked: undefined, root: true, missing: ["bwrap"] })).toEqual({
      sandbox: "none",
      env: { RUNNER_SANDBOX: "none" },
      warning: [
        RULE,
        "!! WARNING: sessions run UNSANDBOXED (RUNNER_SANDBOX=none).",
        "!! bwrap not found in /usr/bin, /bin, /usr/sbin, /sbin: the sandbox needs them.",
        ...RISK,
        "!! Install them: sudo apt-get install bubblewrap slirp4netns nftables python3-seccomp",
        RULE,
      ].join("\n"),
    });
  });

  it("root without slirp4netns, or without nft: the same, naming what is missing", () => {
    for (const missing of ["slirp4netns", "nft"]) {
      const choice = chooseSandbox({ asked: undefined, root: true, missing: [missing] });
      expect(choice.env).toEqual({ RUNNER_SANDBOX: "none" });
      expect(choice.warning?.split("\n")[2]).toBe(`!! ${missing} not found in /usr/bin, /bin, /usr/sbin, /sbin: the sandbox needs them.`);
    }
  });

  it("not root, every program there: RUNNER_SANDBOX=none, the warning says root is needed", () => {
    expect(chooseSandbox({ asked: undefined, root: false, missing: [] })).toEqual({
      sandbox: "none",
      env: { RUNNER_SANDBOX: "none" },
      warning: [
        RULE,
        "!! WARNING: sessions run UNSANDBOXED (RUNNER_SANDBOX=none).",
        "!! npm start is not running as root: the sandbox needs root (namespaces, cgroups, mounts).",
        ...RISK,
        "!! Run npm start as root.",
        RULE,
      ].join("\n"),
    });
  });

  it("not root and every program missing: both reasons, both fixes", () => {
    expect(chooseSandbox({ asked: undefined, root: false, missing: ["bwrap", "slirp4netns", "nft"] }).warning).toBe(
      [
        RULE,
        "!! WARNING: sessions run UNSANDBOXED (RUNNER_SANDBOX=none).",
        "!! bwrap, slirp4netns, nft not found in /usr/bin, /bin, /usr/sbin, /sbin: the sandbox needs them.",
        "!! npm start is not running as root: the sandbox needs root (namespaces, cgroups, mounts).",
        ...RISK,
        "!! Install them: sudo apt-get install bubblewrap slirp4netns nftables python3-seccomp",
        "!! Run npm start as root.",
        RULE,
      ].join("\n"),
    );
  });

  it("RUNNER_SANDBOX=none set by hand: kept, with the warning, even where the sandbox could run", () => {
    expect(chooseSandbox({ asked: "none", root: true, missing: [] })).toEqual({
      sandbox: "none",
      env: { RUNNER_SANDBOX: "none" },
      warning: [RULE, "!! WARNING: sessions run UNSANDBOXED (RUNNER_SANDBOX=none).", "!! RUNNER_SANDBOX=none is set.", ...RISK, "!! Unset it to sandbox them.", RULE].join(
        "\n",
      ),
    });
  });

  it("RUNNER_SANDBOX=bwrap set by hand: passed on as it is, also where it cannot run (the runner refuses and says why)", () => {
    expect(chooseSandbox({ asked: "bwrap", root: false, missing: ["bwrap"] })).toEqual({
      sandbox: "bwrap",
      env: { RUNNER_SANDBOX: "bwrap" },
      warning: undefined,
    });
  });
});

describe("findProgram", () => {
  const dir = mkdtempSync(join(tmpdir(), "ptyb-find-program-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("finds an executable file in the folders given, not a file that is not executable, and not a folder", () => {
    mkdirSync(join(dir, "bin"));
    writeFileSync(join(dir, "bin/ptyb-tool"), "#!/bin/sh\n");
    chmodSync(join(dir, "bin/ptyb-tool"), 0o755);
    writeFileSync(join(dir, "bin/ptyb-plain"), "");
    chmodSync(join(dir, "bin/ptyb-plain"), 0o644);
    mkdirSync(join(dir, "bin/ptyb-folder"));
    expect(findProgram("ptyb-tool", [join(dir, "empty"), join(dir, "bin")])).toBe(join(dir, "bin/ptyb-tool"));
    expect(findProgram("ptyb-tool", [])).toBeUndefined();
    expect(findProgram("ptyb-plain", [join(dir, "bin")])).toBeUndefined();
    expect(findProgram("ptyb-folder", [join(dir, "bin")])).toBeUndefined();
  });

  it("looks where the runner looks, the system's folders, and not on PATH", () => {
    expect(findProgram("sh")).toMatch(/^\/(usr\/)?bin\/sh$/);
    const path = process.env.PATH;
    process.env.PATH = join(dir, "bin");
    try {
      expect(findProgram("ptyb-tool")).toBeUndefined();
    } finally {
      process.env.PATH = path;
    }
  });
});
