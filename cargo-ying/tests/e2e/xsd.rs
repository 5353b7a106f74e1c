//! Validation of XML documents against the JUnit schemas under `schemas/` (copies of the two the project's output
//! must pass: `junit-10.xsd`, the xunit plugin's, which Jenkins validates JUnit files against, and `junit-4.xsd`,
//! Ant's), by libxml2's XML Schema validator, the one `xmllint --schema` runs. libxml2 is loaded when first needed
//! (`libxml2.so.2`, which nearly every Linux system has); without it the tests that validate fail saying so,
//! rather than pass unchecked.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The directory of the schemas the tests validate against.
pub(crate) fn schemas() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/schemas")
}

/// The schemas a JUnit file must pass, by file name.
pub(crate) const JUNIT_SCHEMAS: [&str; 2] = ["junit-10.xsd", "junit-4.xsd"];

/// Validates the JUnit file `document` against every schema of [`JUNIT_SCHEMAS`]; panics with what libxml2 said
/// (and the document) when a schema refuses it.
pub(crate) fn assert_valid_junit(document: &Path) {
    for schema in JUNIT_SCHEMAS {
        if let Err(problems) = validate(&schemas().join(schema), document) {
            let xml = std::fs::read_to_string(document).unwrap_or_default();
            panic!("{schema} refuses {}:\n{}\n{xml}", document.display(), problems.join("\n"));
        }
    }
}

/// The part of libxml2's `xmlError` read here; its layout has been the same since libxml2 2.0.
#[repr(C)]
struct XmlError {
    domain: c_int,
    code: c_int,
    message: *const c_char,
    level: c_int,
    file: *const c_char,
    line: c_int,
}

type StructuredError = extern "C" fn(*mut c_void, *const XmlError);

/// The functions of libxml2 the validation calls.
struct LibXml2 {
    init: extern "C" fn(),
    new_parser: extern "C" fn(*const c_char) -> *mut c_void,
    parser_errors: extern "C" fn(*mut c_void, StructuredError, *mut c_void),
    parse: extern "C" fn(*mut c_void) -> *mut c_void,
    free_parser: extern "C" fn(*mut c_void),
    new_validator: extern "C" fn(*mut c_void) -> *mut c_void,
    validator_errors: extern "C" fn(*mut c_void, StructuredError, *mut c_void),
    validate_file: extern "C" fn(*mut c_void, *const c_char, c_int) -> c_int,
    free_validator: extern "C" fn(*mut c_void),
    free_schema: extern "C" fn(*mut c_void),
}

/// libxml2, loaded once; every use holds the lock (its schema code keeps global state).
static LIBXML2: Mutex<Option<LibXml2>> = Mutex::new(None);

impl LibXml2 {
    fn load() -> Self {
        let library = c"libxml2.so.2";
        // SAFETY: dlopen with a NUL-terminated name; the handle is never closed, so the functions stay loaded.
        let handle = unsafe { libc::dlopen(library.as_ptr(), libc::RTLD_NOW) };
        assert!(
            !handle.is_null(),
            "the JUnit schemas are checked by libxml2's validator, and libxml2.so.2 could not be loaded: install \
             libxml2 (Debian: `apt-get install libxml2`)"
        );
        let symbol = |name: &CStr| {
            // SAFETY: dlsym on the handle above with a NUL-terminated name.
            let address = unsafe { libc::dlsym(handle, name.as_ptr()) };
            assert!(!address.is_null(), "libxml2 has no {name:?}");
            address
        };
        // SAFETY: each symbol is the libxml2 function of that name, whose C signature the field's type gives.
        unsafe {
            Self {
                init: std::mem::transmute::<*mut c_void, extern "C" fn()>(symbol(c"xmlInitParser")),
                new_parser: std::mem::transmute::<*mut c_void, extern "C" fn(*const c_char) -> *mut c_void>(symbol(
                    c"xmlSchemaNewParserCtxt",
                )),
                parser_errors: std::mem::transmute::<
                    *mut c_void,
                    extern "C" fn(*mut c_void, StructuredError, *mut c_void),
                >(symbol(c"xmlSchemaSetParserStructuredErrors")),
                parse: std::mem::transmute::<*mut c_void, extern "C" fn(*mut c_void) -> *mut c_void>(symbol(
                    c"xmlSchemaParse",
                )),
                free_parser: std::mem::transmute::<*mut c_void, extern "C" fn(*mut c_void)>(symbol(
                    c"xmlSchemaFreeParserCtxt",
                )),
                new_validator: std::mem::transmute::<*mut c_void, extern "C" fn(*mut c_void) -> *mut c_void>(symbol(
                    c"xmlSchemaNewValidCtxt",
                )),
                validator_errors: std::mem::transmute::<
                    *mut c_void,
                    extern "C" fn(*mut c_void, StructuredError, *mut c_void),
                >(symbol(c"xmlSchemaSetValidStructuredErrors")),
                validate_file: std::mem::transmute::<
                    *mut c_void,
                    extern "C" fn(*mut c_void, *const c_char, c_int) -> c_int,
                >(symbol(c"xmlSchemaValidateFile")),
                free_validator: std::mem::transmute::<*mut c_void, extern "C" fn(*mut c_void)>(symbol(
                    c"xmlSchemaFreeValidCtxt",
                )),
                free_schema: std::mem::transmute::<*mut c_void, extern "C" fn(*mut c_void)>(symbol(c"xmlSchemaFree")),
            }
        }
    }
}

/// Collects libxml2's errors as `line N: message` into the `Vec<String>` behind `sink`.
extern "C" fn collect(sink: *mut c_void, error: *const XmlError) {
    if sink.is_null() || error.is_null() {
        return;
    }
    // SAFETY: `sink` is the `Vec<String>` `validate` passed, alive for the call; `error` is libxml2's, valid for
    // the callback, its message NUL-terminated or null.
    unsafe {
        let error = &*error;
        let message = if error.message.is_null() {
            String::from("(no message)")
        } else {
            CStr::from_ptr(error.message).to_string_lossy().trim_end().to_owned()
        };
        (*sink.cast::<Vec<String>>()).push(format!("line {}: {message}", error.line));
    }
}

/// Whether `document` is valid against `schema`: `Err` with libxml2's errors (line and message) when it is not.
pub(crate) fn validate(schema: &Path, document: &Path) -> Result<(), Vec<String>> {
    let mut library = LIBXML2.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let xml = library.get_or_insert_with(|| {
        let loaded = LibXml2::load();
        (loaded.init)();
        loaded
    });
    let c_path = |path: &Path| CString::new(path.as_os_str().as_encoded_bytes()).expect("a path without NUL");
    let (schema_path, document_path) = (c_path(schema), c_path(document));
    let mut problems: Vec<String> = Vec::new();
    let sink = (&raw mut problems).cast::<c_void>();
    let parser = (xml.new_parser)(schema_path.as_ptr());
    assert!(!parser.is_null(), "libxml2 could not open {}", schema.display());
    (xml.parser_errors)(parser, collect, sink);
    let parsed = (xml.parse)(parser);
    (xml.free_parser)(parser);
    assert!(!parsed.is_null(), "libxml2 could not read the schema {}: {problems:?}", schema.display());
    let validator = (xml.new_validator)(parsed);
    assert!(!validator.is_null(), "libxml2 made no validator");
    (xml.validator_errors)(validator, collect, sink);
    let result = (xml.validate_file)(validator, document_path.as_ptr(), 0);
    (xml.free_validator)(validator);
    (xml.free_schema)(parsed);
    match result {
        0 => Ok(()),
        _ if problems.is_empty() => Err(vec![format!("libxml2 returned {result} and said nothing")]),
        _ => Err(problems),
    }
}

#[test]
fn the_validator_refuses_what_a_schema_does_not_allow_and_takes_what_it_does() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, xml: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, xml).unwrap();
        path
    };
    let valid = write(
        "valid.xml",
        "<testsuites><testsuite name=\"s\" tests=\"1\" failures=\"0\" errors=\"0\"><testcase name=\"t\"><skipped/></testcase></testsuite>\
         </testsuites>",
    );
    assert_valid_junit(&valid);
    // junit-4 takes no attribute on <skipped>; junit-10 does.
    let message = write(
        "message.xml",
        "<testsuites><testsuite name=\"s\" tests=\"1\" failures=\"0\" errors=\"0\"><testcase name=\"t\"><skipped message=\"ignored\"/>\
         </testcase></testsuite></testsuites>",
    );
    assert!(validate(&schemas().join("junit-10.xsd"), &message).is_ok());
    let refused = validate(&schemas().join("junit-4.xsd"), &message).unwrap_err();
    assert!(refused.iter().any(|problem| problem.contains("message")), "{refused:?}");
    // A testcase without its required name.
    let nameless = write(
        "nameless.xml",
        "<testsuites><testsuite name=\"s\" tests=\"1\" failures=\"0\" errors=\"0\"><testcase/></testsuite></testsuites>",
    );
    for schema in JUNIT_SCHEMAS {
        let refused = validate(&schemas().join(schema), &nameless).unwrap_err();
        assert!(refused.iter().any(|problem| problem.contains("line 1") && problem.contains("name")), "{refused:?}");
    }
}
