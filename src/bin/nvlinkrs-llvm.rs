//! `nvlinkrs-llvm`: the helper process in which LLVM runs for nvlinkrs (see
//! `nvlinkrs::lto::llvm_helper`). Not meant to be run by hand.
//!
//!     nvlinkrs-llvm summarize ORIGIN < module.bc     → the module's summary as JSON
//!     nvlinkrs-llvm lto [--libdevice=PATH] [--cache-dir=DIR] -- OPTIONS... < request  → PTX (see
//!         `nvlinkrs::lto::llvm_engine`)
//!     nvlinkrs-llvm link-ir [--nvidia=I,J] < modules   → the modules linked into one, as bitcode (see
//!         `nvlinkrs::lto::prelink`)

use std::io::{Read, Write};
use std::process::ExitCode;

use nvlinkrs::diag::{Error, Result};
use nvlinkrs::lto::{bitcode, llvm_engine, prelink};

fn run(args: &[String], pool: &nvlinkrs::jobs::Jobs) -> Result<Vec<u8>> {
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .map_err(|e| Error::fatal(format!("reading the request: {e}")))?;
    match args {
        [cmd, origin] if cmd == "summarize" => {
            let s = bitcode::summarize_in_process(&input, origin)?;
            serde_json::to_vec(&s).map_err(|e| Error::fatal(e.to_string()))
        }
        [cmd, rest @ ..] if cmd == "link-ir" => prelink::link_in_process(&input, rest),
        [cmd, rest @ ..] if cmd == "lto" => {
            let split = rest.iter().position(|a| a == "--").unwrap_or(rest.len());
            let libdevice = rest[..split]
                .iter()
                .find_map(|a| a.strip_prefix("--libdevice="))
                .map(std::path::Path::new);
            // the shared tier: the link's --remote-cache, else the environment's
            let shared = nvlinkrs::cache::remote::Spec::choose(
                rest[..split]
                    .iter()
                    .find_map(|a| a.strip_prefix("--remote-cache=")),
            );
            let cache = rest[..split]
                .iter()
                .find_map(|a| a.strip_prefix("--cache-dir="))
                .map(|d| {
                    nvlinkrs::cache::Cache::open(
                        std::path::Path::new(d),
                        nvlinkrs::cache::DEFAULT_CAP,
                    )
                    .map(|c| c.with_remote(shared.as_ref()))
                })
                .transpose()?;
            let options = rest.get(split + 1..).unwrap_or(&[]);
            let pieces =
                llvm_engine::compile_in_process(&input, options, libdevice, cache.as_ref(), pool)?;
            let failure = cache
                .as_ref()
                .and_then(|c| c.remote())
                .and_then(|r| r.first_failure());
            Ok(nvlinkrs::frames::encode(
                pieces.iter().map(|p| ("ptx", p.as_slice())).chain(
                    failure
                        .iter()
                        .map(|f| (llvm_engine::HELPER_SHARED_FAILURE, f.as_bytes())),
                ),
            ))
        }
        _ => Err(Error::fatal(format!(
            "nvlinkrs-llvm: unknown request {args:?} (this helper is started by nvlinkrs)"
        ))),
    }
}

fn main() -> ExitCode {
    // before anything opens a file: the descriptors MAKEFLAGS names are make's
    let pool = nvlinkrs::jobs::Jobs::new(nvlinkrs::jobs::connect_jobserver());
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args, &pool) {
        Ok(out) => {
            let _ = std::io::stdout().write_all(&out);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}
