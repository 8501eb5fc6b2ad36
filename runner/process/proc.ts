// Reads /proc/PID/stat (Linux). Field 2, the command name, may hold spaces and parentheses,
// so the fields are taken after the last ')': [0] state, [1] ppid, [2] pgrp, [3] session,
// [4] tty_nr, [5] tpgid, ...
import { readFileSync } from "node:fs";

export function statFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null; // gone, or not Linux
  }
}
