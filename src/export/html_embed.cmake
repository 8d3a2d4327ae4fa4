# The HTML report's CSS and JS (src/export/html/) are compiled into libktiming: no file is read at run time.
include(${PROJECT_SOURCE_DIR}/cmake/KtimingEmbed.cmake)
kt_embed(ktiming kt_embed_report_css ${CMAKE_CURRENT_SOURCE_DIR}/html/report.css)
kt_embed(ktiming kt_embed_report_js ${CMAKE_CURRENT_SOURCE_DIR}/html/report.js)
