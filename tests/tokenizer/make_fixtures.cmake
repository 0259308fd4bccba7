# Installs the pinned reference packages and writes the fixtures, unless the
# fixtures are newer than every input (scripts, corpus, lock file). The
# SentencePiece models come first: make_reference.js encodes with them too.
set(stamp ${OUT_DIR}/.stamp)
file(GLOB inputs ${SOURCE_DIR}/make_reference.js ${SOURCE_DIR}/package-lock.json
     ${SOURCE_DIR}/make_spm_fixtures.py
     ${SOURCE_DIR}/corpus/*)
set(fresh FALSE)
if(EXISTS ${stamp})
  set(fresh TRUE)
  foreach(f ${inputs})
    if(${f} IS_NEWER_THAN ${stamp})
      set(fresh FALSE)
    endif()
  endforeach()
endif()
if(fresh)
  message(STATUS "tokenizer fixtures up to date in ${OUT_DIR}")
  return()
endif()
execute_process(COMMAND ${NPM} ci --no-audit --no-fund
  WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "npm ci failed (${rc})")
endif()
execute_process(COMMAND ${PYTHON} ${SOURCE_DIR}/make_spm_fixtures.py
  ${SOURCE_DIR}/corpus ${OUT_DIR}/spm_models RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "make_spm_fixtures.py failed (${rc})")
endif()
execute_process(COMMAND ${NODE} ${SOURCE_DIR}/make_reference.js ${OUT_DIR}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "make_reference.js failed (${rc})")
endif()
file(TOUCH ${stamp})
