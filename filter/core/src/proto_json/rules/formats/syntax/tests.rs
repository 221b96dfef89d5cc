use super::*;

/// `cases` holds space-separated inputs, valid ones before a lone "|" and invalid ones after it.
fn check(function: impl Fn(&str) -> bool, cases: &str) {
    let mut expected = true;
    for text in cases.split(' ').filter(|text| !text.is_empty()) {
        if text == "|" {
            expected = false;
        } else {
            assert_eq!(function(text), expected, "{text:?}");
        }
    }
}

#[test]
fn blank_and_spaced_inputs_are_rejected() {
    for text in [
        "",
        " ",
        "a b",
        " a@b.c",
        "x\n",
        "\0",
        "host name:80",
        "1.2.3.4 ",
        "a:b c",
    ] {
        let accepted = email(text) | hostname(text) | address(text) | host_and_port(text) | uri(text) | uuid(text);
        let accepted = accepted | tuuid(text) | ulid(text) | protobuf_fqn(text) | protobuf_dot_fqn(text);
        let accepted = accepted | ip(text, 0) | ip_prefix(text, 0) | ip_with_prefixlen(text, 0);
        assert!(!accepted, "{text:?}");
    }
    assert!(!uri_ref("/a b") && uri_ref("") && !http_header_name("", false) && http_header_value("", true));
}

#[test]
fn email_follows_html_definition() {
    let cases = "foo@example.com a.b+tag@sub.example.co !#$%&'*+/=?^_`{|}~-@x user@localhost x@1.2.3.4 | @x.com";
    check(email, cases);
    let cases = "| foo@ foo@bar@baz \"q\"@example.com Foo<foo@example.com> foo@example.com. foo@-bad.com";
    check(email, cases);
    let cases = "| foo@exa_mple.com foo@[127.0.0.1] föo@example.com foo@a..b foo@exämple.com";
    check(email, cases);
    assert!(!email(&format!("foo@{}.com", "a".repeat(64))));
}

#[test]
fn hostname_follows_rfc_1034() {
    let cases = "example.com Example.COM. a xn--bcher-kva.de 1a.2b a-b.c-d 0x1 | . example..com -a.com a-.com";
    check(hostname, cases);
    let cases = "| a_b.com bücher.de 1.2.3.4 foo.123 example.com.. .example.com";
    check(hostname, cases);
    let at_limit = ["a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(61)].join(".");
    let cases = format!("{at_limit} {at_limit}. | {at_limit}e {}", "a".repeat(64));
    check(hostname, &cases);
}

#[test]
fn ip_families_and_zones() {
    check(
        |t| ip(t, 4) && ip(t, 0) && !ip(t, 6),
        "0.0.0.0 192.168.5.21 255.255.255.255",
    );
    let cases = ":: ::1 2001:0DB8:ABCD:0012::0 fe80::a%en1 ::ffff:192.1.56.10 1:2:3:4:5:6:7:8 1:2:3:4:5:6:7::";
    check(|t| ip(t, 6) && ip(t, 0) && !ip(t, 4), cases);
    // protovalidate takes any non-empty zone id, even one with blanks.
    assert!(ip("fe80::1%any thing/?", 6) && ip("fe80::1%any thing/?", 0));
    let any_version = |t: &str| ip(t, 0) || ip(t, 4) || ip(t, 6);
    let cases = "| 1.2.3 1.2.3.4.5 256.1.1.1 01.2.3.4 1.2.3.04 +1.2.3.4 fe80::1% :::1 1:2:3:4:5:6:7:8:9";
    check(any_version, cases);
    let cases = "| 1:2:3:4::5:6:7:8 12345:: ::ffff:01.2.3.4 ::1.2.3 [::1] g::1 ١.٢.٣.٤ %eth0 1.2.3.4%eth0";
    check(any_version, cases);
    check(
        any_version,
        "| 1::2: ::1:2:3:4:5:6:7:8 1:2:3:4:5:6:1.2.3.4:5 ::1.2.3.256",
    );
    assert!(ip("fe80::1%%25", 6) && ip("1:2:3:4:5:6:1.2.3.4", 6) && !ip("127.0.0.1", 5) && !ip("::1", 1));
}

#[test]
fn prefixes_with_and_without_host_bits() {
    let cases = "192.168.5.21/16 0.0.0.0/0 10.0.0.1/32 2001:0DB8:ABCD:0012::F1/64 ::1/128 | 192.168.5.21";
    check(|t| ip_with_prefixlen(t, 0), cases);
    let cases = "| 1.2.3.4/33 ::1/129 1.2.3.4/ /8 1.2.3.4/08 1.2.3.4/+8 ::1%eth0/64 1.2.3.4/8/8 01.2.3.4/8";
    check(|t| ip_with_prefixlen(t, 0), cases);
    assert!(ip_with_prefixlen("1.2.3.4/24", 4) && !ip_with_prefixlen("1.2.3.4/24", 6));
    assert!(ip_with_prefixlen("::1/64", 6) && !ip_with_prefixlen("::1/64", 4));
    let cases = "192.168.0.0/16 0.0.0.0/0 10.0.0.1/32 2001:0DB8:ABCD:0012::0/64 ::/0 128.0.0.0/1 | 192.168.5.21/16";
    check(|t| ip_prefix(t, 0), cases);
    check(
        |t| ip_prefix(t, 0),
        "| 2001:db8::1/64 0.0.0.1/0 128.0.0.0/0 ::1/127 1.2.3.4/33 1.2.3.4/0032",
    );
    assert!(ip_prefix("10.0.0.0/8", 4) && !ip_prefix("10.0.0.0/8", 6) && !ip_prefix("10.0.0.0/8", 9));
}

#[test]
fn address_and_host_and_port() {
    check(address, "example.com 127.0.0.1 ::1 fe80::1%en0 | 1.2.3 foo_bar [::1]");
    let cases = "example.com:8080 example.com.:0 127.0.0.1:65535 [::1]:443 [fe80::1%en0]:80 a:1 | example.com";
    check(host_and_port, cases);
    let cases = "| example.com: example.com:65536 example.com:080 example.com:+80 ::1:80 [::1] [::1]443 [::1]:";
    check(host_and_port, cases);
    let cases = "| [127.0.0.1]:80 1.2.3:80 [example.com]:80 example.com:８０ example.com:99999999999999999999";
    check(host_and_port, cases);
}

#[test]
fn uri_is_absolute_rfc_3986() {
    let cases = "https://example.com/foo/bar?baz=quux#frag mailto:user@example.com urn:isbn:0451450523 http://";
    check(uri, cases);
    let cases = "file:///etc/hosts http://user:pw@host:8080/p http://[::1]:80/ http://[fe80::a%25en1]/";
    check(uri, cases);
    let cases = "http://[v1.fe80::a+en1]/ http://[::ffff:1.2.3.4]/ http://host:99999 http://%C3%BCber.de/";
    check(uri, cases);
    check(uri, "foo+bar.baz-1: http://h/a%2Fb?q=%20#f?/ x:/a:b/@c http://h/%FF");
    let cases = "| example.com/foo ./foo 1http://x :foo http://x/% http://x/%zz http://x/%4 http://[::1";
    check(uri, cases);
    let cases = "| http://[::1]x/ http://[fe80::a%en1]/ http://[fe80::a%25]/ http://[fe80::a%25%FF]/ http://%FF/";
    check(uri, cases);
    let cases = "| http://foo%c3x%96/ http://x:8o/ http://x/a#b#c http://ü.de/ http://x/{} http://a@b@c/";
    check(uri, cases);
    check(
        uri,
        "| http://[::1]:80:80/ http://[v.x]/ http://[1.2.3.4]/ http://x/\u{0} http://x/\\",
    );
}

#[test]
fn uri_ref_accepts_relative_references() {
    let cases = "./foo/bar?query /abs/path foo ?q #frag //host/path a/b:c https://example.com %41";
    check(uri_ref, cases);
    check(uri_ref, "| a:b\u{1} :foo % //[::1/ ü \\path a:%");
    assert!(!uri("./foo"));
}

#[test]
fn uuid_forms() {
    let cases = "550e8400-e29b-41d4-a716-446655440000 550E8400-E29B-41D4-A716-446655440000 | 550e8400e29b41d4";
    check(uuid, cases);
    let cases = "| 550e8400-e29b-41d4-a716-44665544000g 550e8400-e29b-41d4-a716-4466554400000";
    check(uuid, cases);
    check(
        uuid,
        "| 550e8400-e29b41d4--a716-446655440000 550e8400-e29b-41d4-a716-44665544000é",
    );
    check(
        tuuid,
        "550e8400e29b41d4a716446655440000 550E8400E29B41D4A716446655440000",
    );
    let cases =
        "| 550e8400e29b41d4a71644665544000 550e8400-e29b-41d4-a716-446655440000 550e8400e29b41d4a71644665544000é";
    check(tuuid, cases);
}

#[test]
fn ulid_is_crockford() {
    check(
        ulid,
        "01ARZ3NDEKTSV4RRFFQ69G5FAV 7zzzzzzzzzzzzzzzzzzzzzzzzz 00000000000000000000000000",
    );
    check(
        ulid,
        "| 81ARZ3NDEKTSV4RRFFQ69G5FAV 01ARZ3NDEKTSV4RRFFQ69G5FA 01ARZ3NDEKTSV4RRFFQ69G5FAVV",
    );
    let cases = "| 01ARZ3NDEKTSV4RRFFQ69G5FAI 01ARZ3NDEKTSV4RRFFQ69G5FAl 01ARZ3NDEKTSV4RRFFQ69G5FAO";
    check(ulid, cases);
    check(ulid, "| 01ARZ3NDEKTSV4RRFFQ69G5FAu 01ARZ3NDEKTSV4RRFFQ69G5FÄ");
}

#[test]
fn protobuf_names() {
    let cases = "buf.validate google.protobuf.Timestamp my_package.MyMessage _x A | .buf.validate buf..validate";
    check(protobuf_fqn, cases);
    check(protobuf_fqn, "| buf.validate. 1buf buf.1x buf-validate bäf");
    let cases = ".buf.validate .google.protobuf.Timestamp ._ | . ..buf buf.validate .buf. .9";
    check(protobuf_dot_fqn, cases);
}

#[test]
fn http_headers_strict_and_loose() {
    let cases = "Content-Type :authority x-custom_1 !#$%&'*+-.^_`|~ | : ::path a: a,b ä a\u{7f} a\r\nb (x)";
    check(|t| http_header_name(t, true), cases);
    check(|t| http_header_name(t, false), "ä : a,b a\u{1} | a\0 a\r a\nb");
    check(
        |t| http_header_value(t, true),
        "text/html;q=0.9 a\tb ünïcode | a\rb a\nb \0 \u{1} \u{7f}",
    );
    check(|t| http_header_value(t, false), "\u{1} \u{7f} a\tb | a\rb a\nb \0");
    assert!(http_header_name("a b", false) && !http_header_name("a b", true) && http_header_value("a b", true));
}

#[test]
fn huge_and_odd_inputs_never_panic() {
    let huge = format!("{}{}", "a".repeat(1 << 16), "%ä[]:@/?#\u{0}");
    let odd = "% [ ] []: @ :: / %2 \u{10FFFF} [%25] %25 [v [v1. //[ //@ //: a:// a://[]";
    for text in odd.split(' ').chain([huge.as_str()]) {
        let _ = email(text) | hostname(text) | ip(text, 0) | ip_prefix(text, 0) | ip_with_prefixlen(text, 6);
        let _ = uri(text) | uri_ref(text) | address(text) | host_and_port(text) | uuid(text) | tuuid(text);
        let _ = ulid(text) | protobuf_fqn(text) | protobuf_dot_fqn(text) | http_header_name(text, true);
    }
}
