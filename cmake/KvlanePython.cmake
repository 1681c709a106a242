# Probes for the Python module (python/): pybind11 (CONFIG) and Python's
# interpreter and module headers. Sets KVLANE_HAVE_PYTHON and, when the tests
# can run, KVLANE_PYTHON_PYTEST.
#
# KVLANE_PYTHON: AUTO builds the module when both are found and says why not
# otherwise; ON requires them; OFF skips the probe. AUTO also skips sanitizer
# builds: a sanitized module loads only with the sanitizer runtime preloaded
# into the interpreter.

set(KVLANE_HAVE_PYTHON OFF)
set(KVLANE_PYTHON_PYTEST OFF)
set(kvlane_python_why "")

# Debian's python3-pybind11 and python3-pytest serve /usr/bin/python3, and a
# python3 earlier on PATH (pyenv, conda) may lack pytest. Unless the build
# names Python3_EXECUTABLE, the first python3 on PATH that imports pytest is
# used (else FindPython3's own choice). Cached: probed once per build dir.
function(kvlane_python_with_pytest out)
  if(DEFINED CACHE{KVLANE_PYTHON_CANDIDATE})
    set(${out} "${KVLANE_PYTHON_CANDIDATE}" PARENT_SCOPE)
    return()
  endif()
  set(found "")
  string(REPLACE ":" ";" dirs "$ENV{PATH}")
  foreach(dir IN LISTS dirs)
    if(dir AND EXISTS "${dir}/python3")
      execute_process(COMMAND "${dir}/python3" -c "import pytest" RESULT_VARIABLE rc
                      OUTPUT_QUIET ERROR_QUIET)
      if(rc EQUAL 0)
        set(found "${dir}/python3")
        break()
      endif()
    endif()
  endforeach()
  set(KVLANE_PYTHON_CANDIDATE "${found}" CACHE INTERNAL "python3 on PATH that imports pytest")
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

if(KVLANE_PYTHON STREQUAL "AUTO" AND (KVLANE_ASAN OR KVLANE_TSAN))
  set(kvlane_python_why " (sanitizer build)")
elseif(NOT KVLANE_PYTHON STREQUAL "OFF")
  if(NOT Python3_EXECUTABLE)
    kvlane_python_with_pytest(kvlane_python_exe)
    if(kvlane_python_exe)
      set(Python3_EXECUTABLE "${kvlane_python_exe}")
    endif()
  endif()
  find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
  if(Python3_FOUND)
    find_package(pybind11 CONFIG QUIET)
  endif()
  if(NOT Python3_FOUND)
    set(kvlane_python_why " (no Python 3 interpreter with headers: python3-dev)")
  elseif(NOT pybind11_FOUND)
    set(kvlane_python_why " (no pybind11 CMake package: python3-pybind11)")
  else()
    set(KVLANE_HAVE_PYTHON ON)
    execute_process(COMMAND "${Python3_EXECUTABLE}" -c "import pytest" RESULT_VARIABLE rc
                    OUTPUT_QUIET ERROR_QUIET)
    if(rc EQUAL 0)
      set(KVLANE_PYTHON_PYTEST ON)
    else()
      message(STATUS "kvlane: Python tests not registered: ${Python3_EXECUTABLE} has no pytest "
                     "(python3-pytest)")
    endif()
  endif()
  if(KVLANE_PYTHON STREQUAL "ON" AND NOT KVLANE_HAVE_PYTHON)
    message(FATAL_ERROR "KVLANE_PYTHON=ON but the Python module cannot be built${kvlane_python_why}")
  endif()
endif()
if(KVLANE_HAVE_PYTHON)
  message(STATUS "kvlane: Python module ON (${Python3_EXECUTABLE}, pybind11 ${pybind11_VERSION})")
else()
  message(STATUS "kvlane: Python module OFF${kvlane_python_why}")
endif()
