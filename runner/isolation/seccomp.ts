// The seccomp filter every sandbox runs under (docs/security.md, "The seccomp filter"): made once
// at the runner's start by seccomp-profile.py (libseccomp's Python bindings, Debian's
// python3-seccomp, run by the system's /usr/bin/python3) into the run's root-only folder, and
// handed to bubblewrap on fd 9 (launch.ts opens it in the root step; sandbox.ts, --seccomp).
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const PROFILE = fileURLToPath(new URL("./seccomp-profile.py", import.meta.url));

/** Writes the filter's BPF to `path` (mode 0600); its size in BPF instructions. Throws saying what is missing. */
export function writeSeccompFilter(python: string, path: string): number {
  let out: string;
  try {
    // -I: no PYTHON* variable, user site or current folder reaches the interpreter that runs as root.
    out = execFileSync(python, ["-I", PROFILE, path], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], env: { PATH: "/usr/bin:/bin", LANG: "C.UTF-8" } });
  } catch (error) {
    const stderr = String((error as { stderr?: unknown }).stderr ?? "").trim().split("\n").slice(-3).join(" ");
    throw new Error(`the sandbox's seccomp filter could not be made (Debian: apt-get install python3-seccomp): ${stderr || (error as Error).message}`);
  }
  const instructions = Number(out.trim());
  if (!Number.isInteger(instructions) || instructions <= 0) throw new Error(`the sandbox's seccomp filter is empty (${out.trim()})`);
  return instructions;
}
