# Writes OUT (a header defining KVLANE_GIT_REVISION) from the git revision of
# SRC, run at build time (the kvlane_git_revision target), so the revision is
# the one the sources were built from, not the one the build was configured at.
# "-dirty" marks uncommitted changes to tracked files. OUT is rewritten only
# when it changes, so an unchanged revision rebuilds nothing.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT rev)
  set(rev "unknown")
else()
  execute_process(COMMAND git diff --quiet HEAD -- WORKING_DIRECTORY ${SRC} RESULT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    set(rev "${rev}-dirty")
  endif()
endif()
set(text "// Generated at build time by cmake/git_revision.cmake.\n#pragma once\n#define KVLANE_GIT_REVISION \"${rev}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
