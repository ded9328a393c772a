// The one LLVM call the LLVM-C API lacks that nvlinkrs needs: linking a module into
// another in LLVM's "only needed" mode (llvm-link --only-needed), so that a device
// library's definitions come in only where the program names them, and, with the
// library read lazily, only those are ever read from its bitcode (src/lto/prelink.rs).
#include <llvm-c/Core.h>
#include <llvm/IR/Module.h>
#include <llvm/Linker/Linker.h>

#include <memory>

// Links `src` into `dst`, taking only what `dst` needs; `src` is consumed either way.
// Returns 0 on success, 1 when LLVM's linker reports an error (its diagnostics go
// through the context's handler, as with LLVMLinkModules2).
extern "C" int nvlinkrs_link_only_needed(LLVMModuleRef dst, LLVMModuleRef src) {
  std::unique_ptr<llvm::Module> source(llvm::unwrap(src));
  return llvm::Linker::linkModules(*llvm::unwrap(dst), std::move(source),
                                   llvm::Linker::Flags::LinkOnlyNeeded)
             ? 1
             : 0;
}
