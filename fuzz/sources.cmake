# The files of core/ that the fuzz targets link, and nothing else: `make fuzz`
# compiles only these under clang's sanitizers and coverage (29 of the 143
# files; the build took most of the fuzz step's time). A parser that starts
# calling into another file fails the fuzz build with an undefined reference
# that names it: add the file here.
set(AIR_FUZZ_CORE_SOURCES
  base/duration.cpp base/json_depth.cpp base/json_error.cpp base/redact.cpp base/sha256.cpp
  base/suggest.cpp base/text.cpp
  cluster/control_auth.cpp cluster/control_message.cpp cluster/slurm.cpp
  os/file_read.cpp
  report/rank_result.cpp
  run/error_file.cpp run/python_traceback.cpp
  spec/accelerator_type.cpp spec/describe.cpp spec/keys.cpp spec/rendezvous.cpp spec/resolve.cpp
  spec/resolve_apply.cpp spec/resolve_env.cpp spec/resolve_file.cpp spec/resolve_flags.cpp
  spec/resolve_settle.cpp spec/resolve_values.cpp spec/torchrun.cpp spec/torchrun_values.cpp
  spec/yaml_syntax.cpp)
set(AIR_FUZZ_MLFLOW_SOURCES plain_http.cpp)
