#!/usr/bin/perl
# The Perl twin of hello.c (see there): the same output, byte for byte.
use strict;
use warnings;

my @vars = qw(GATEWAY_INTERFACE SERVER_PROTOCOL REQUEST_METHOD QUERY_STRING CONTENT_LENGTH
              CONTENT_TYPE SCRIPT_NAME PATH_INFO REMOTE_ADDR HTTP_X_CGI_TEST);
binmode STDIN;
binmode STDOUT;
$| = 0;
my $q = $ENV{QUERY_STRING};
print "Content-Type: text/plain\r\n";
print "Status: ", int($1), " Chosen\r\n" if defined $q && $q =~ /status=(-?\d*)/;
print "\r\n";
for my $v (@vars) {
    print "$v=", (defined $ENV{$v} ? $ENV{$v} : "(unset)"), "\n";
}
my $cl = $ENV{CONTENT_LENGTH};
my $want = defined $cl && $cl ne "" ? int($cl) : -1;
my ($len, $buf) = (0, "");
print "body: ";
while ($want < 0 || $len < $want) {
    my $n = read(STDIN, $buf, $want < 0 || $want - $len > 65536 ? 65536 : $want - $len);
    last unless $n;
    print $buf;
    $len += $n;
}
print "\nbody bytes: $len\n";
