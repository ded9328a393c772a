//! The options of a request, one by one: the fields of its `Debug` text (so that every
//! field the request has, now or later, is a part of the key), and how the command line
//! spells each one.

/// The top-level fields of a struct's `Debug` text (`Name { a: 1, b: Some("x, y") }`),
/// each with its value's text: split at the commas outside brackets and strings.
pub fn fields(debug: &str) -> Vec<(String, String)> {
    let body = match (debug.find('{'), debug.rfind('}')) {
        (Some(a), Some(b)) if a < b => &debug[a + 1..b],
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    let (mut depth, mut in_str, mut escaped, mut start) = (0i32, false, false, 0);
    let mut push = |piece: &str| {
        let piece = piece.trim();
        if let Some((name, value)) = piece.split_once(": ") {
            out.push((name.trim().to_string(), value.trim().to_string()));
        }
    };
    for (i, c) in body.char_indices() {
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    push(&body[start..]);
    out
}

/// How the command line spells the option behind a request's field.
pub fn spelling(field: &str) -> String {
    let s = match field {
        "target" | "target_kind" => "-arch",
        "output" => "-o",
        "libraries" => "-l",
        "library_paths" => "-L",
        "lto" | "lto_spelled_dlto" => "-dlto",
        "nvvmpath" => "-nvvmpath",
        "cuda_path" => "--cuda-path",
        "debug" => "-g",
        "preserve_relocs" => "--preserve-relocs",
        "emit_ptx" => "-emit-ptx",
        "ignore_host_info" => "-ignore-host-info",
        "kernels_used" => "-kernels-used",
        "variables_used" => "-variables-used",
        "maxrregcount" => "-maxrregcount",
        "split_compile" => "-split-compile",
        "split_compile_extended" => "-split-compile-extended",
        "ofast_compile" => "-Ofast-compile",
        "xnvvm" => "-Xnvvm",
        "xptxas" => "-Xptxas",
        "register_link_binaries" => "--register-link-binaries",
        "relocatable" => "-r",
        "emit_ltoir" => "--emit-ltoir",
        "nvvm_latest" => "-nvvm-latest",
        "disable_smem_reservation" => "-disable-smem-reservation",
        "allow_undefined_globals" => "-allow-undefined-globals",
        "force_partial_lto" => "-force-partial-lto",
        "force_whole_lto" => "-force-whole-lto",
        "tool_name" => "-tool-name",
        "machine" => "-m",
        "cpu_arch" => "-cpu-arch",
        "recorded" => "(the options the image's note records: -w, -Werror, -disable-infos, ...)",
        other => return format!("'{other}'"),
    };
    s.to_string()
}
