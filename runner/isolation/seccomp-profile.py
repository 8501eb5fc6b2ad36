"""The seccomp filter every sandbox runs under (docs/security.md, "The seccomp filter").

Run once at the runner's start by seccomp.ts, as root, with the system's /usr/bin/python3 -I and
Debian's python3-seccomp (libseccomp's own bindings: the BPF is libseccomp's, never written by
hand). Writes the filter as raw BPF to the path it is given (mode 0600), for bubblewrap's
`--seccomp FD`, and prints its size in BPF instructions.

Default: allow. Refused with EPERM (not a kill: a program that tries gets an error it can report):
keyrings, new user namespaces, joining namespaces, mounts (but a remount: the sandbox's first step
bounds its devpts with one), kernel modules and kexec, bpf, perf,
userfaultfd, io_uring, TIOCSTI/TIOCLINUX on any tty, and the host-wide calls that capabilities
already deny (acct, swap, reboot, syslog, open_by_handle_at). clone3 gets ENOSYS (its flags are in
memory a filter cannot read), so libc falls back to clone, whose flags are filtered. Docker's
default profile is the model; ptrace stays (gdb inside a session debugs its own children), and so
does personality (gdb turns ASLR off for its child; under no_new_privs a personality reaches
nothing more privileged than the session).
"""
import errno
import os
import sys

from seccomp import ALLOW, ERRNO, MASKED_EQ, Arch, Arg, SyscallFilter

CLONE_NEWUSER = 0x10000000
MS_REMOUNT = 0x20
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
EPERM = ERRNO(errno.EPERM)

REFUSED = [
    # keyrings: no session reads or adds to a keyring (the runner's included)
    "keyctl", "add_key", "request_key",
    # namespaces and mounts: the sandbox's view is bubblewrap's, made before the filter applies
    "setns", "umount", "umount2", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "pivot_root", "chroot",
    # the kernel itself
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    # large kernel surfaces an ordinary session does not need
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    # host-wide, already root's only (Docker refuses them too)
    "acct", "swapon", "swapoff", "reboot", "syslog", "lookup_dcookie", "open_by_handle_at",
]


def profile() -> SyscallFilter:
    f = SyscallFilter(defaction=ALLOW)
    native = Arch()
    # x86_64 hosts also run i386 and x32 code: the same rules for those ABIs, so none is a way around.
    for arch in [Arch.X86_64, Arch.X86, Arch.X32] if native == Arch.X86_64 else []:
        if arch != native:
            f.add_arch(arch)
    for name in REFUSED:
        try:
            f.add_rule(EPERM, name)
        except (RuntimeError, ValueError):
            pass  # not a call on these architectures
    # New user namespaces: unshare and clone with CLONE_NEWUSER; clone3 cannot be filtered by flags.
    f.add_rule(EPERM, "unshare", Arg(0, MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
    f.add_rule(EPERM, "clone", Arg(0, MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
    f.add_rule(ERRNO(errno.ENOSYS), "clone3")
    # mount: only a remount, which the sandbox's first step makes as root inside to bound its
    # devpts (sandbox.ts); after the drop the session's user has no capability to remount, and no
    # user namespace to get one in.
    f.add_rule(EPERM, "mount", Arg(3, MASKED_EQ, MS_REMOUNT, 0))
    # The command is an unsigned int: the kernel ignores the upper 32 bits, so the filter does too.
    for request in (TIOCSTI, TIOCLINUX):
        f.add_rule(EPERM, "ioctl", Arg(1, MASKED_EQ, 0xFFFFFFFF, request))
    return f


def main() -> None:
    out = sys.argv[1]
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as file:
        profile().export_bpf(file)
    print(os.path.getsize(out) // 8)


if __name__ == "__main__":
    main()
