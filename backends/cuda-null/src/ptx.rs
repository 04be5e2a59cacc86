//! The little of PTX the null driver reads: the `.entry` declarations and their `.param`
//! lists, so that `cuModuleGetFunction` and `cuFuncGetParamInfo` answer as the driver would for
//! the same text. Nothing else of the module is looked at (no instruction is parsed or run).

/// One kernel entry point: its name and, per parameter, `(offset, size)` in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub name: String,
    pub params: Vec<(usize, usize)>,
}

/// The entries of PTX `text`, or a message saying what could not be read.
pub(crate) fn entries(text: &str) -> Result<Vec<Entry>, String> {
    if !text.contains(".version") || !text.contains(".target") {
        return Err("null driver: not PTX text (no .version / .target directive)".into());
    }
    let text = strip_comments(text);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find(".entry") {
        let after = &rest[at + ".entry".len()..];
        // `.entry` must be a whole token (not a prefix of another directive).
        if !after.starts_with(|c: char| c.is_whitespace()) {
            rest = after;
            continue;
        }
        let after = after.trim_start();
        let name_len = after
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$' || c == '%'))
            .unwrap_or(after.len());
        let name = &after[..name_len];
        if name.is_empty() {
            return Err("null driver: .entry without a name".into());
        }
        let tail = after[name_len..].trim_start();
        let mut params = Vec::new();
        let mut consumed = name_len;
        if let Some(list) = tail.strip_prefix('(') {
            let close = list
                .find(')')
                .ok_or_else(|| format!("null driver: unclosed parameter list of `{name}`"))?;
            let mut end = 0usize;
            for decl in list[..close]
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
            {
                let (size, align) =
                    param(decl).map_err(|e| format!("null driver: `{name}`: {e}"))?;
                let off = end.div_ceil(align) * align;
                params.push((off, size));
                end = off + size;
            }
            consumed = after.len() - list.len() + close + 1;
        }
        out.push(Entry {
            name: name.to_string(),
            params,
        });
        rest = &after[consumed..];
    }
    Ok(out)
}

/// Size and alignment of one `.param` declaration (`.param .u64 p`,
/// `.param .align 8 .b8 s[16]`, `.param .u64 .ptr .global .align 8 p`).
fn param(decl: &str) -> Result<(usize, usize), String> {
    let toks: Vec<&str> = decl.split_whitespace().collect();
    if toks.first() != Some(&".param") || toks.len() < 3 {
        return Err(format!("unreadable parameter `{decl}`"));
    }
    let mut elem = None;
    let mut align = None;
    let mut i = 1;
    while i + 1 < toks.len() {
        match toks[i] {
            ".align" => {
                let n: usize = toks[i + 1]
                    .parse()
                    .map_err(|_| format!("bad .align in `{decl}`"))?;
                // A pointer attribute's `.align` (after `.ptr`) is about the pointee, not the
                // parameter; it is only taken before the type.
                if elem.is_none() {
                    align = Some(n);
                }
                i += 2;
                continue;
            }
            t => {
                if elem.is_none() {
                    elem = type_size(t);
                }
            }
        }
        i += 1;
    }
    let elem = elem.ok_or_else(|| format!("no known type in `{decl}`"))?;
    let name = toks[toks.len() - 1];
    let count = match (name.find('['), name.strip_suffix(']')) {
        (Some(open), Some(inner)) => inner[open + 1..]
            .parse::<usize>()
            .map_err(|_| format!("bad array length in `{decl}`"))?,
        _ => 1,
    };
    let align = align.unwrap_or(elem);
    if align == 0 || !align.is_power_of_two() {
        return Err(format!("bad alignment in `{decl}`"));
    }
    Ok((elem * count, align))
}

/// Bytes of a PTX fundamental type token, `None` for any other token.
fn type_size(t: &str) -> Option<usize> {
    Some(match t {
        ".b8" | ".u8" | ".s8" | ".pred" => 1,
        ".b16" | ".u16" | ".s16" | ".f16" | ".bf16" => 2,
        ".b32" | ".u32" | ".s32" | ".f32" | ".f16x2" | ".bf16x2" => 4,
        ".b64" | ".u64" | ".s64" | ".f64" => 8,
        ".b128" => 16,
        _ => return None,
    })
}

/// `text` without `//` line comments and `/* */` block comments.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let line = rest.find("//");
        let block = rest.find("/*");
        match (line, block) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |n| &rest[l + n..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                rest = rest[b + 2..]
                    .find("*/")
                    .map_or("", |e| &rest[b + 2 + e + 2..]);
                out.push(' ');
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_laid_out_like_the_abi() {
        let ptx = ".version 8.0\n.target sm_70\n// .entry commented(.param .u32 x)\n\
            .visible .entry k(.param .u64 out, .param .align 8 .b8 s[16], .param .u8 x, \
            .param .u16 y, .param .u64 z, .param .f32 w)\n{ ret; }\n\
            .entry none()\n{ ret; }\n.entry bare\n{ ret; }\n";
        let e = entries(ptx).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].name, "k");
        assert_eq!(
            e[0].params,
            vec![(0, 8), (8, 16), (24, 1), (26, 2), (32, 8), (40, 4)]
        );
        assert_eq!(e[1].name, "none");
        assert!(e[1].params.is_empty());
        assert_eq!(e[2].name, "bare");
    }

    #[test]
    fn pointer_attributes_keep_the_parameter_size() {
        let ptx = ".version 8.0\n.target sm_90\n.entry p(.param .u32 n, .param .u64 .ptr .global .align 16 q)\n{}";
        assert_eq!(entries(ptx).unwrap()[0].params, vec![(0, 4), (8, 8)]);
    }

    #[test]
    fn not_ptx_and_bad_params_are_errors() {
        assert!(entries("\x7fELF").is_err());
        assert!(entries(".version 8.0\n.target sm_70\n.entry k(.param .weird x)\n{}").is_err());
        assert!(entries(".version 8.0\n.target sm_70\n.entry k(.param .u32 x\n").is_err());
    }
}
