#!/bin/sh
# A shell CGI program: cgi_httpd runs it as a child process, since the
# commands a script runs need fork and exec, which a μprocess has not
# (docs/uproc.md).  It echoes its method, query and body.
printf 'Content-Type: text/plain\r\n\r\n'
echo "REQUEST_METHOD=$REQUEST_METHOD"
echo "QUERY_STRING=$QUERY_STRING"
printf 'body: '
head -c "${CONTENT_LENGTH:-0}"
echo
