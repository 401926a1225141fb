//! cgroup v2 has no `devices.deny` file: device access is decided by an eBPF
//! program of type `BPF_PROG_TYPE_CGROUP_DEVICE` attached to the cgroup (what
//! runc and systemd's `DevicePolicy` do). This module builds that program for
//! a deny list of character devices (the GPUs a workload was not given),
//! loads it with the `bpf(2)` system call and attaches it to the workload's
//! cgroup, so a workload that ignores `CUDA_VISIBLE_DEVICES` cannot open the
//! other GPUs' `/dev/nvidiaN` ("Operation not permitted").
//!
//! The program is a handful of hand-assembled instructions, so no eBPF
//! toolchain or library is needed:
//!
//! ```text
//!     r2 = ctx->access_type & 0xffff   ; device type (1 block, 2 char)
//!     r3 = ctx->major ; r4 = ctx->minor
//!   per denied (major, minor):
//!     if r2 != 2     goto next
//!     if r3 != major goto next
//!     if r4 != minor goto next
//!     return 0                          ; deny
//!   next: ...
//!     return 1                          ; allow everything else
//! ```
//!
//! It is attached with `BPF_F_ALLOW_MULTI`, so programs the host attached
//! higher up (systemd's) keep applying: access needs every program's yes. The
//! attachment lives as long as the cgroup; nothing needs detaching.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
const BPF_CGROUP_DEVICE: u32 = 6;
const BPF_F_ALLOW_MULTI: u32 = 2;
/// `bpf_cgroup_dev_ctx.access_type`'s low half for a character device.
const BPF_DEVCG_DEV_CHAR: i32 = 2;

/// One eBPF instruction, as the kernel reads it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Insn {
    code: u8,
    /// dst register in the low nibble, src register in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

/// `dst = *(u32 *)(r1 + off)`: BPF_LDX | BPF_MEM | BPF_W.
const fn load_ctx_u32(dst: u8, off: i16) -> Insn {
    insn(0x61, dst, 1, off, 0)
}
/// `dst &= imm` (32-bit): BPF_ALU | BPF_AND | BPF_K.
const fn and32(dst: u8, imm: i32) -> Insn {
    insn(0x54, dst, 0, 0, imm)
}
/// `if dst != imm goto +off`: BPF_JMP | BPF_JNE | BPF_K.
const fn jump_unless(dst: u8, imm: i32, off: i16) -> Insn {
    insn(0x55, dst, 0, off, imm)
}
/// `r0 = imm`: BPF_ALU64 | BPF_MOV | BPF_K.
const fn ret_value(imm: i32) -> Insn {
    insn(0xb7, 0, 0, 0, imm)
}
/// BPF_JMP | BPF_EXIT.
const EXIT: Insn = insn(0x95, 0, 0, 0, 0);

/// The program denying each `(major, minor)` character device and allowing
/// every other access.
fn deny_program(deny: &[(u32, u32)]) -> Vec<Insn> {
    let mut p = vec![
        load_ctx_u32(2, 0),
        and32(2, 0xffff),
        load_ctx_u32(3, 4),
        load_ctx_u32(4, 8),
    ];
    for &(major, minor) in deny {
        // Each test jumps past the rest of its five-instruction block.
        p.push(jump_unless(2, BPF_DEVCG_DEV_CHAR, 4));
        p.push(jump_unless(3, major as i32, 3));
        p.push(jump_unless(4, minor as i32, 2));
        p.push(ret_value(0));
        p.push(EXIT);
    }
    p.push(ret_value(1));
    p.push(EXIT);
    p
}

/// `union bpf_attr` for BPF_PROG_LOAD, up to `expected_attach_type`; the
/// kernel accepts a shorter attr than its own and zero-fills the rest.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` for BPF_PROG_ATTACH.
#[repr(C)]
#[derive(Default)]
struct ProgAttachAttr {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a properly laid out, initialised bpf_attr prefix of
    // `size_of::<T>()` bytes that outlives the call; the kernel reads (and,
    // for a load, writes the log into the buffer the attr points at) only
    // within it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Loads the deny program; the verifier's log comes back in the error.
fn load(deny: &[(u32, u32)]) -> io::Result<OwnedFd> {
    let insns = deny_program(deny);
    let license = b"Apache-2.0\0";
    let mut log = vec![0u8; 4096];
    let mut name = [0u8; 16];
    name[..14].copy_from_slice(b"caldera_devcg\0");
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        prog_name: name,
        expected_attach_type: BPF_CGROUP_DEVICE,
        ..Default::default()
    };
    match bpf(BPF_PROG_LOAD, &mut attr) {
        // SAFETY: a successful BPF_PROG_LOAD returns a new fd we now own.
        Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
        Err(e) => {
            let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
            let verifier = String::from_utf8_lossy(&log[..end]);
            Err(io::Error::new(
                e.kind(),
                format!("loading the device program: {e} {}", verifier.trim()),
            ))
        }
    }
}

/// Attaches a program denying `deny` (character devices) to the cgroup v2
/// directory `cgroup_dir`. Needs CAP_BPF/CAP_SYS_ADMIN.
pub fn attach_deny(cgroup_dir: &Path, deny: &[(u32, u32)]) -> io::Result<()> {
    let prog = load(deny)?;
    let dir = std::fs::File::open(cgroup_dir)?;
    let mut attr = ProgAttachAttr {
        target_fd: dir.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: BPF_F_ALLOW_MULTI,
    };
    bpf(BPF_PROG_ATTACH, &mut attr).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "attaching the device program to {}: {e}",
                cgroup_dir.display()
            ),
        )
    })?;
    Ok(())
}

/// Whether this process may load device programs at all (probed once at
/// startup, so the isolation label says what holds).
pub fn can_load() -> io::Result<()> {
    load(&[]).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_denied_device_is_a_five_instruction_block_that_skips_to_the_next() {
        let p = deny_program(&[(195, 0), (195, 2)]);
        assert_eq!(p.len(), 4 + 2 * 5 + 2);
        // The second block tests minor 2 and falls through to the final allow.
        assert_eq!(p[4 + 5 + 2], jump_unless(4, 2, 2));
        assert_eq!(p[p.len() - 2], ret_value(1));
        // Every forward jump lands on an instruction of the program.
        for (i, ins) in p.iter().enumerate() {
            if ins.code == 0x55 {
                assert!(i + 1 + (ins.off as usize) < p.len(), "jump at {i}");
            }
        }
        assert_eq!(std::mem::size_of::<Insn>(), 8);
    }
}
