//! What an ELF executable's header says about it: the machine it is for (`e_machine`) and whether
//! it needs a program interpreter (`PT_INTERP`). Read from the few bytes that matter, so that the
//! release checks need no object-file crate.

/// `e_machine` of x86-64 (linux/amd64).
pub const EM_X86_64: u16 = 62;
/// `e_machine` of AArch64 (linux/arm64).
pub const EM_AARCH64: u16 = 183;

/// The `e_machine` of a 64-bit little-endian ELF file.
pub fn elf_machine(bytes: &[u8]) -> Result<u16, String> {
    check_elf64(bytes)?;
    u16_at(bytes, 0x12)
}

/// The program interpreter a 64-bit little-endian ELF file asks for, if any.
pub fn elf_interpreter(bytes: &[u8]) -> Result<Option<String>, String> {
    const PT_INTERP: u32 = 3;
    check_elf64(bytes)?;
    let u64_at = |at: usize| -> Result<usize, String> {
        bytes
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| "truncated ELF header".to_owned())
    };
    let (phoff, phentsize, phnum) = (
        u64_at(0x20)?,
        usize::from(u16_at(bytes, 0x36)?),
        usize::from(u16_at(bytes, 0x38)?),
    );
    for index in 0..phnum {
        let header = phoff + index * phentsize;
        let kind = bytes
            .get(header..header + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or("truncated program header")?;
        if kind == PT_INTERP {
            let (offset, size) = (u64_at(header + 8)?, u64_at(header + 32)?);
            let name = bytes
                .get(offset..offset + size)
                .ok_or("truncated interpreter name")?;
            return Ok(Some(
                String::from_utf8_lossy(name)
                    .trim_end_matches('\0')
                    .to_owned(),
            ));
        }
    }
    Ok(None)
}

fn check_elf64(bytes: &[u8]) -> Result<(), String> {
    if bytes.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err("not an ELF file".into());
    }
    if bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    Ok(())
}

fn u16_at(bytes: &[u8], at: usize) -> Result<u16, String> {
    bytes
        .get(at..at + 2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .ok_or_else(|| "truncated ELF header".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_interpreter_of_a_dynamic_executable() {
        // This test's own executable is an ordinary (dynamic) build.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let interpreter = elf_interpreter(&me).unwrap();
        assert!(
            interpreter
                .as_deref()
                .is_some_and(|i| i.contains("ld-linux")),
            "{interpreter:?}"
        );
        assert!(elf_interpreter(b"#!/bin/sh\n").is_err());
    }

    #[test]
    fn reads_the_machine() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let expected = match std::env::consts::ARCH {
            "x86_64" => EM_X86_64,
            "aarch64" => EM_AARCH64,
            other => panic!("teach this test {other}"),
        };
        assert_eq!(elf_machine(&me), Ok(expected));
        // The first 20 bytes of an AArch64 executable's header.
        let mut header = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x02\0".to_vec();
        header.extend(EM_AARCH64.to_le_bytes());
        assert_eq!(elf_machine(&header), Ok(EM_AARCH64));
        assert!(elf_machine(&header[..0x13]).is_err());
        assert!(elf_machine(b"\xcf\xfa\xed\xfe\x0c\0\0\x01").is_err());
    }
}
