// Where the shell's command line is in a session's output: between the OSC 133 marks B (the
// prompt has been drawn; what follows is the line being typed, echoed) and the next mark (C: it
// runs; A or D: a new prompt, e.g. after Ctrl+C). `expect` skips those bytes (docs/protocol.md
// §3, "Agents": it never matches the echoed command line). The newest marks are kept in storage
// with the offset, so an `expect` after hibernation still knows that its `from` lies in a
// command line.
import { type ShellMark, ShellMarkScanner } from "../../shared/shell-marks.js";

/** Marks kept: enough to place a `from` a few commands back. */
const KEPT = 64;
const STORAGE_KEY = "promptMarks";

interface Kept {
  kind: ShellMark["kind"];
  end: number;
}

export class PromptMarks {
  private scanner: ShellMarkScanner | undefined;
  private readonly marks: Kept[];
  private unsaved = false;

  constructor(private readonly kv: SyncKvStorage) {
    this.marks = kv.get<Kept[]>(STORAGE_KEY) ?? [];
  }

  /** Output at `offset`, in order (a jump, such as after a wake-up, starts scanning afresh). */
  output(offset: number, data: Uint8Array): void {
    if (this.scanner?.offset !== offset) this.scanner = new ShellMarkScanner(offset);
    const found = this.scanner.push(offset, data);
    if (found.length === 0) return;
    for (const mark of found) this.marks.push({ kind: mark.kind, end: mark.end });
    this.marks.splice(0, Math.max(0, this.marks.length - KEPT));
    this.unsaved = true;
  }

  /**
   * Stores the marks, if new ones came, with the session's offset (the acks' storage sync): a
   * write of their own per prompt would hold that prompt's frame at the edge until it is durable.
   */
  persist(): void {
    if (!this.unsaved) return;
    this.unsaved = false;
    this.kv.put(STORAGE_KEY, this.marks);
  }

  /** Whether output at `offset` belongs to a command line: the last mark before it is B. */
  inCommandLine(offset: number): boolean {
    for (let i = this.marks.length - 1; i >= 0; i--) {
      const mark = this.marks[i];
      if (mark && mark.end <= offset) return mark.kind === "B";
    }
    return false;
  }

  /** The session's storage is going (purge): nothing to keep. */
  forget(): void {
    this.marks.length = 0;
    this.unsaved = false;
    this.scanner = undefined;
  }
}
