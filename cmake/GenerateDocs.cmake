# cmake -DAIR_RUN=<binary> -DOUT=<dir> -P GenerateDocs.cmake
# Writes what the installed air-run ships besides itself, all printed by the
# binary from its options and key table: the man page (gzipped, as man-db
# reads it) and the bash and zsh completions.
file(MAKE_DIRECTORY "${OUT}")
foreach(doc "air-run.1;--print-man" "air-run.bash;--print-completion;bash" "_air-run;--print-completion;zsh")
  list(POP_FRONT doc name)
  execute_process(COMMAND "${AIR_RUN}" ${doc} OUTPUT_FILE "${OUT}/${name}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${AIR_RUN} ${doc} failed (${rc})")
  endif()
endforeach()
# -n: no name or time stamp inside, so the same page gives the same bytes.
execute_process(COMMAND gzip -9 -n -f "${OUT}/air-run.1" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip ${OUT}/air-run.1 failed (${rc})")
endif()
