# install.cmake - what `cmake --install` (make install) puts under the
# prefix: the header, libraybox.a and libraybox.so, raybox.pc, the CMake
# package (find_package(raybox) -> raybox::raybox) and the programs.
include(CMakePackageConfigHelpers)

set(RAYBOX_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/raybox)

install(FILES ${PROJECT_SOURCE_DIR}/include/raybox.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ${RAYBOX_LIBRARIES} EXPORT raybox-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

# The CMake package. Its files find their prefix from where they lie, so
# the installed tree may move.
install(EXPORT raybox-targets NAMESPACE raybox::
        FILE raybox-targets.cmake DESTINATION ${RAYBOX_CMAKE_DIR})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/rayboxConfig.cmake.in
  ${PROJECT_BINARY_DIR}/rayboxConfig.cmake
  INSTALL_DESTINATION ${RAYBOX_CMAKE_DIR})
# 0.x: the shared library's SOVERSION is the major version, and so is what
# a find_package(raybox 0.1) accepts.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/rayboxConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rayboxConfig.cmake
              ${PROJECT_BINARY_DIR}/rayboxConfigVersion.cmake
        DESTINATION ${RAYBOX_CMAKE_DIR})

# raybox.pc. OpenCL comes from find_package, so its pkg-config module may
# be missing: then the static link line names the library itself.
set(RAYBOX_PC_REQUIRES_PRIVATE "")
set(RAYBOX_PC_LIBS_PRIVATE "")
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(RAYBOX_PC_OPENCL QUIET OpenCL)
endif()
if(RAYBOX_PC_OPENCL_FOUND)
  set(RAYBOX_PC_REQUIRES_PRIVATE "OpenCL")
else()
  set(RAYBOX_PC_LIBS_PRIVATE "-lOpenCL ")
endif()
string(APPEND RAYBOX_PC_LIBS_PRIVATE "-pthread -lm")
# The prefix is the one of the install (cmake --install --prefix wins over
# CMAKE_INSTALL_PREFIX), so the file is written when it is installed.
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(RAYBOX_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(RAYBOX_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
set(RAYBOX_PC_PREFIX "@RAYBOX_PC_PREFIX@") # left for the install step
configure_file(${PROJECT_SOURCE_DIR}/cmake/raybox.pc.in
               ${PROJECT_BINARY_DIR}/raybox.pc.in @ONLY)
install(CODE "
  set(RAYBOX_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/raybox.pc.in\"
                 \"${PROJECT_BINARY_DIR}/raybox.pc\" @ONLY)")
install(FILES ${PROJECT_BINARY_DIR}/raybox.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(NOT RAYBOX_LIBRARY_ONLY)
  set(programs rayboxd raybox_cli raybox-bench)
  if(TARGET raybox_mpi)
    list(APPEND programs raybox_mpi)
  endif()
  install(TARGETS ${programs} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  # Man pages made from each program's --help by help2man (Debian's; make
  # deps installs it), so that they say what the programs say.
  find_program(RAYBOX_HELP2MAN help2man)
  if(RAYBOX_HELP2MAN)
    set(pages)
    foreach(prog ${programs})
      if(prog STREQUAL raybox_cli)
        set(name raybox)
        set(what "ray-box intersection from files (batch CLI)")
      elseif(prog STREQUAL raybox_mpi)
        set(name raybox-mpi)
        set(what "raybox's batch jobs over MPI ranks")
      elseif(prog STREQUAL rayboxd)
        set(name rayboxd)
        set(what "the raybox HTTP service")
      else()
        set(name raybox-bench)
        set(what "measure raybox on every device")
      endif()
      add_custom_command(
        OUTPUT ${PROJECT_BINARY_DIR}/man/${name}.1
        COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
        COMMAND ${RAYBOX_HELP2MAN} --no-info --no-discard-stderr
                --version-string=${PROJECT_VERSION} --name=${what}
                --output=${PROJECT_BINARY_DIR}/man/${name}.1
                $<TARGET_FILE:${prog}>
        DEPENDS ${prog}
        COMMENT "man page ${name}.1 (help2man)"
        VERBATIM)
      list(APPEND pages ${PROJECT_BINARY_DIR}/man/${name}.1)
    endforeach()
    add_custom_target(man_pages ALL DEPENDS ${pages})
    install(FILES ${pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  else()
    message(STATUS "no help2man: man pages are not made (make deps "
                   "installs it)")
  endif()
endif()
