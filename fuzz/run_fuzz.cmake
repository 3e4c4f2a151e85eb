# One fuzz target as ctest runs it (see CMakeLists.txt): every seed and
# regression input once, then RUNS inputs from seed 1. New inputs go to a
# work folder in the build tree, emptied first so each run starts alike;
# the repository's corpus is only read.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(dirs "${WORK}")
foreach(d "${SRC}/corpus/${NAME}" "${SRC}/regressions/${NAME}")
  if(IS_DIRECTORY "${d}")
    list(APPEND dirs "${d}")
  endif()
endforeach()
set(dict "")
if(EXISTS "${SRC}/${NAME}.dict")
  set(dict "-dict=${SRC}/${NAME}.dict")
endif()
execute_process(
  COMMAND "${BIN}" -seed=1 -runs=${RUNS} -timeout=30 -rss_limit_mb=2560 -print_final_stats=1
          ${dict} -artifact_prefix=${WORK}/ ${dirs}
  RESULT_VARIABLE code)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "fuzz_${NAME} failed (exit ${code}); the input that did it is in ${WORK}/")
endif()
