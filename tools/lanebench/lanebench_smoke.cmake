# CTest driver: runs a short mixed shape on tcp and checks behaviour only:
# the run succeeded, every measured iteration verified, both arms have numbers.
# With -DPIN=on it runs with --pin on and checks that the document says so.
# Usage: cmake -DLANEBENCH=<binary> -DOUT=<json path> [-DPIN=on] -P lanebench_smoke.cmake
set(extra)
if(PIN)
  set(extra --pin ${PIN})
endif()
execute_process(
  COMMAND ${LANEBENCH} --transport tcp --shape mixed --pairs 1 --warmup 2 --iters 10
          --timeout 60 --json ${OUT} ${extra}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "lanebench exited with ${rc}")
endif()
file(READ ${OUT} doc)

string(JSON outcome GET "${doc}" outcome)
string(JSON measured GET "${doc}" verification measured_iterations)
string(JSON verified GET "${doc}" verification verified_iterations)
if(NOT outcome STREQUAL "ok" OR NOT measured EQUAL 20 OR NOT verified EQUAL measured)
  message(FATAL_ERROR "outcome ${outcome}: ${verified}/${measured} iterations verified")
endif()

foreach(arm global-fifo independent)
  string(JSON nruns LENGTH "${doc}" cases 0 arms ${arm} runs)
  if(NOT nruns EQUAL 1)
    message(FATAL_ERROR "${arm}: ${nruns} runs, expected 1")
  endif()
  foreach(key small_p50_us small_p99_us bulk_p50_us bulk_p99_us window_gbps)
    string(JSON type TYPE "${doc}" cases 0 arms ${arm} median ${key})
    string(JSON value GET "${doc}" cases 0 arms ${arm} median ${key})
    if(NOT type STREQUAL "NUMBER" OR NOT value GREATER 0)
      message(FATAL_ERROR "${arm} ${key}: '${value}' (${type}) is not a positive number")
    endif()
  endforeach()
  # Every iteration's Post() time and poller stall, and the run's host-stall probe.
  string(JSON nposts LENGTH "${doc}" cases 0 arms ${arm} runs 0 post_us small)
  string(JSON nstalls LENGTH "${doc}" cases 0 arms ${arm} runs 0 stall_us small)
  string(JSON spin GET "${doc}" cases 0 arms ${arm} runs 0 host_stalls spin_ms)
  string(JSON tail GET "${doc}" cases 0 arms ${arm} tail measured)
  if(NOT nposts EQUAL 10 OR NOT nstalls EQUAL 10 OR NOT spin GREATER 0 OR NOT tail EQUAL 10)
    message(FATAL_ERROR "${arm}: post_us ${nposts}, stall_us ${nstalls} samples, "
                        "stall probe ${spin} ms, tail over ${tail} iterations")
  endif()
endforeach()
if(PIN STREQUAL "on")
  string(JSON pinned GET "${doc}" config pinning on)
  string(JSON poller GET "${doc}" config pinning poller_cpu)
  if(NOT pinned OR poller LESS 0)
    message(FATAL_ERROR "--pin on: the document says pinning ${pinned}, poller CPU ${poller}")
  endif()
endif()
message(STATUS "lanebench smoke: ${verified}/${measured} verified, both arms measured")
