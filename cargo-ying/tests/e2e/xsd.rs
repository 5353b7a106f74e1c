//! A validator of XML documents against a schema read from its `.xsd`, for the subset of XML Schema that the JUnit
//! schemas under `schemas/` use: global `xs:element`s (referred to by `ref`, with an inline `xs:complexType`, or
//! typed by a named complex type or `xs:string`), local elements of those types, `xs:sequence` and `xs:choice` with
//! their `minOccurs` and `maxOccurs`, nested; `xs:attribute`s, required or optional, of type `xs:string` or of a
//! named `xs:simpleType` that restricts `xs:string` by one `xs:pattern`; `mixed` content.
//!
//! Anything else in a schema panics ("unsupported schema construct"), so that the validator never accepts what it
//! did not check. Where `xmllint` is installed, the tests here run it on the same documents and schemas: it is the
//! reference the validator must agree with.

use regex::Regex;
use roxmltree::{Document, Node, NodeType};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

const XSD_NAMESPACE: &str = "http://www.w3.org/2001/XMLSchema";

/// The directory of the schemas the tests validate against.
pub(crate) fn schemas() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/schemas")
}

/// What `xmllint --noout --schema` says of `document`: `None` when it is not installed, else whether it accepted
/// the document, with what it printed.
pub(crate) fn xmllint(schema: &Path, document: &Path) -> Option<(bool, String)> {
    let output = match Command::new("xmllint").arg("--noout").arg("--schema").arg(schema).arg(document).output() {
        Ok(output) => output,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => panic!("xmllint: {error}"),
    };
    Some((output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned()))
}

/// Where `node` starts in its document, as `line:column`.
fn at(node: Node) -> String {
    let position = node.document().text_pos_at(node.range().start);
    format!("{}:{}", position.row, position.col)
}

fn unsupported(node: Node, what: &str) -> ! {
    panic!("unsupported schema construct at {}: {what}", at(node))
}

/// The type of an element.
enum Type {
    /// `xs:string`: text, and neither attributes nor elements.
    Text,
    /// A complex type declared at the top of the schema, by its name.
    Named(String),
    /// A complex type declared in the element.
    Complex(Complex),
}

/// An element declared in a content model or at the top of the schema.
struct Element {
    name: String,
    ty: Type,
}

struct Complex {
    /// Whether text may stand between its elements.
    mixed: bool,
    /// Its elements, or `None` for an element with no elements.
    content: Option<Particle>,
    attributes: Vec<Attribute>,
}

struct Attribute {
    name: String,
    required: bool,
    /// The simple type restricting its value, by name; `None` for `xs:string`.
    simple_type: Option<String>,
}

/// A term of a content model, with how often it occurs: at least `min` times, at most `max` (`None`: unbounded).
struct Particle {
    term: Term,
    min: usize,
    max: Option<usize>,
}

enum Term {
    /// A global element, by its name.
    Ref(String),
    Local(Box<Element>),
    Sequence(Vec<Particle>),
    Choice(Vec<Particle>),
}

/// A schema, read from its `.xsd`.
pub(crate) struct Schema {
    elements: HashMap<String, Element>,
    complex_types: HashMap<String, Complex>,
    /// Each named simple type's pattern, anchored.
    simple_types: HashMap<String, Regex>,
}

/// The element children of `node`, each in the XML Schema namespace; comments and whitespace are passed over, and
/// anything else is unsupported.
fn schema_children<'a, 'input>(node: Node<'a, 'input>) -> Vec<Node<'a, 'input>> {
    let mut children = Vec::new();
    for child in node.children() {
        match child.node_type() {
            NodeType::Element if child.tag_name().namespace() == Some(XSD_NAMESPACE) => children.push(child),
            NodeType::Element => unsupported(child, &format!("<{}> outside XML Schema", child.tag_name().name())),
            NodeType::Text if child.text().is_some_and(|text| text.trim().is_empty()) => {}
            NodeType::Comment => {}
            _ => unsupported(child, &format!("{:?} in <xs:{}>", child.node_type(), node.tag_name().name())),
        }
    }
    children
}

/// Panics unless every attribute of `node` is one of `allowed`.
fn allow_attributes(node: Node, allowed: &[&str]) {
    for attribute in node.attributes() {
        if attribute.namespace().is_some() || !allowed.contains(&attribute.name()) {
            unsupported(node, &format!("the attribute {} of <xs:{}>", attribute.name(), node.tag_name().name()));
        }
    }
}

fn required_attribute<'a>(node: Node<'a, '_>, attribute: &str) -> &'a str {
    node.attribute(attribute)
        .unwrap_or_else(|| unsupported(node, &format!("<xs:{}> without {attribute}", node.tag_name().name())))
}

/// `minOccurs` and `maxOccurs` of `node`, 1 unless given.
fn occurs(node: Node) -> (usize, Option<usize>) {
    let count = |attribute: &str| {
        node.attribute(attribute).map(|value| {
            value.parse::<usize>().unwrap_or_else(|_| unsupported(node, &format!("{attribute}=\"{value}\"")))
        })
    };
    let min = count("minOccurs").unwrap_or(1);
    let max = match node.attribute("maxOccurs") {
        Some("unbounded") => None,
        _ => Some(count("maxOccurs").unwrap_or(1)),
    };
    if max.is_some_and(|max| max < min) {
        unsupported(node, "maxOccurs below minOccurs");
    }
    (min, max)
}

/// The type `value` on `node` names: `None` for `xs:string`, else the name of a type the schema declares.
fn type_name(node: Node, value: &str) -> Option<String> {
    match value.split_once(':') {
        Some((prefix, "string")) if node.lookup_namespace_uri(Some(prefix)) == Some(XSD_NAMESPACE) => None,
        Some(_) => unsupported(node, &format!("the type {value}")),
        None => Some(value.to_owned()),
    }
}

/// An XSD pattern as a `regex`, anchored as XSD patterns are. The constructs whose meaning differs between the two
/// are refused rather than read otherwise: `^`, `$` and `.` outside a class (literals in XSD, anchors in `regex`;
/// XSD's `.` also excludes a carriage return), `(?`, a class within a class (class subtraction in XSD, union in
/// `regex`), `regex`'s doubled set operators in a class, and escapes other than of a metacharacter, `\n`, `\r`,
/// `\t`, `\d` and `\D`.
fn pattern(node: Node, value: &str) -> Regex {
    fn refuse(node: Node, value: &str, what: &str) -> ! {
        unsupported(node, &format!("{what} in the pattern {value:?}"))
    }

    let mut chars = value.chars().peekable();
    let (mut in_class, mut class_start) = (false, false);
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\\' | '.' | '-' | '^' | '$' | '?' | '*' | '+' | '{' | '}' | '(' | ')' | '[' | ']' | '|') => {}
                Some('n' | 'r' | 't' | 'd' | 'D') => {}
                escape => {
                    refuse(node, value, &format!("the escape \\{}", escape.map(String::from).unwrap_or_default()))
                }
            },
            '[' if in_class => refuse(node, value, "a class within a class"),
            '[' => {
                (in_class, class_start) = (true, true);
                continue;
            }
            ']' if in_class => in_class = false,
            '^' if in_class && class_start => {}
            '^' | '$' | '.' if !in_class => refuse(node, value, &format!("{c} outside a class")),
            '(' if !in_class && chars.peek() == Some(&'?') => refuse(node, value, "(?"),
            '-' | '&' | '~' if in_class && chars.peek() == Some(&c) => {
                refuse(node, value, &format!("{c}{c} in a class"))
            }
            _ => {}
        }
        class_start = false;
    }
    Regex::new(&format!("^(?:{value})$")).unwrap_or_else(|error| refuse(node, value, &error.to_string()))
}

impl Schema {
    pub(crate) fn read(path: &Path) -> Self {
        let xsd = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        Self::parse(&xsd)
    }

    /// The schema `xsd` declares; panics on what the validator does not support.
    pub(crate) fn parse(xsd: &str) -> Self {
        let document = Document::parse(xsd).unwrap_or_else(|error| panic!("the schema is not XML: {error}"));
        let root = document.root_element();
        if root.tag_name().namespace() != Some(XSD_NAMESPACE) || root.tag_name().name() != "schema" {
            unsupported(root, "a root other than <xs:schema>");
        }
        allow_attributes(root, &[]);
        if root.lookup_namespace_uri(None).is_some() {
            unsupported(root, "a default namespace");
        }
        let mut schema = Self { elements: HashMap::new(), complex_types: HashMap::new(), simple_types: HashMap::new() };
        for child in schema_children(root) {
            let name = required_attribute(child, "name").to_owned();
            let fresh = match child.tag_name().name() {
                "element" => {
                    allow_attributes(child, &["name", "type"]);
                    schema.elements.insert(name.clone(), element(child)).is_none()
                }
                "complexType" => {
                    allow_attributes(child, &["name", "mixed"]);
                    schema.complex_types.insert(name.clone(), complex(child)).is_none()
                }
                "simpleType" => {
                    allow_attributes(child, &["name"]);
                    schema.simple_types.insert(name.clone(), simple_type(child)).is_none()
                }
                other => unsupported(child, &format!("<xs:{other}>")),
            };
            if !fresh {
                unsupported(child, &format!("a second declaration of {name}"));
            }
        }
        schema.check_references();
        schema
    }

    /// Panics on a reference to a declaration the schema lacks, and on a content model that declares two elements
    /// of the same name differently (which XML Schema forbids, and which would leave a child's type unknown).
    fn check_references(&self) {
        let types = self.elements.values().map(|element| &element.ty);
        for complex in types.filter_map(|ty| self.complex(ty)).chain(self.complex_types.values()) {
            self.check_complex(complex);
        }
    }

    fn check_complex(&self, complex: &Complex) {
        for attribute in &complex.attributes {
            if let Some(name) = &attribute.simple_type {
                assert!(self.simple_types.contains_key(name), "the schema refers to an undeclared simple type {name}");
            }
        }
        if let Some(particle) = &complex.content {
            self.declarations(particle, &mut HashMap::new());
            self.check_locals(particle);
        }
    }

    /// Checks the types of the elements `particle` declares in place (global ones are checked on their own).
    fn check_locals(&self, particle: &Particle) {
        match &particle.term {
            Term::Ref(_) => {}
            Term::Local(element) => {
                if let Some(complex) = self.complex(&element.ty) {
                    self.check_complex(complex);
                }
            }
            Term::Sequence(particles) | Term::Choice(particles) => {
                particles.iter().for_each(|particle| self.check_locals(particle));
            }
        }
    }

    fn complex<'a>(&'a self, ty: &'a Type) -> Option<&'a Complex> {
        match ty {
            Type::Text => None,
            Type::Named(name) => Some(
                self.complex_types
                    .get(name)
                    .unwrap_or_else(|| panic!("the schema refers to an undeclared complex type {name}")),
            ),
            Type::Complex(complex) => Some(complex),
        }
    }

    /// The type of each element `particle` admits, by name.
    fn declarations<'a>(&'a self, particle: &'a Particle, into: &mut HashMap<&'a str, &'a Type>) {
        let (name, ty) = match &particle.term {
            Term::Ref(name) => {
                let element = self
                    .elements
                    .get(name)
                    .unwrap_or_else(|| panic!("the schema refers to an undeclared element {name}"));
                (name.as_str(), &element.ty)
            }
            Term::Local(element) => (element.name.as_str(), &element.ty),
            Term::Sequence(particles) | Term::Choice(particles) => {
                for particle in particles {
                    self.declarations(particle, into);
                }
                return;
            }
        };
        if let Some(other) = into.insert(name, ty) {
            assert!(std::ptr::eq(other, ty), "the schema declares two elements {name} in one content model");
        }
    }

    /// Checks `xml` against the schema: `Err` lists what does not fit, each with its line and column.
    pub(crate) fn validate(&self, xml: &str) -> Result<(), Vec<String>> {
        let document = Document::parse(xml).map_err(|error| vec![format!("not XML: {error}")])?;
        let root = document.root_element();
        let mut problems = Vec::new();
        match self.elements.get(root.tag_name().name()).filter(|_| root.tag_name().namespace().is_none()) {
            Some(element) => self.check(root, &element.ty, &mut problems),
            None => problems.push(format!("{}: <{}> is no global element of the schema", at(root), name(root))),
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }

    fn check(&self, node: Node, ty: &Type, problems: &mut Vec<String>) {
        let here = format!("{}: <{}>", at(node), name(node));
        let Some(complex) = self.complex(ty) else {
            if let Some(attribute) = node.attributes().next() {
                problems.push(format!("{here} has the attribute {}, which xs:string does not allow", attribute.name()));
            }
            if let Some(child) = node.children().find(Node::is_element) {
                problems.push(format!("{here} holds <{}>, which xs:string does not allow", name(child)));
            }
            return;
        };

        for attribute in complex.attributes.iter().filter(|attribute| attribute.required) {
            if node.attribute(attribute.name.as_str()).is_none() {
                problems.push(format!("{here} lacks the required attribute {}", attribute.name));
            }
        }
        for attribute in node.attributes() {
            let declared = complex
                .attributes
                .iter()
                .find(|declared| declared.name == attribute.name() && attribute.namespace().is_none());
            let Some(declared) = declared else {
                problems
                    .push(format!("{here} has the attribute {}, which the schema does not declare", attribute.name()));
                continue;
            };
            if let Some(simple_type) = &declared.simple_type
                && !self.simple_types[simple_type].is_match(attribute.value())
            {
                problems.push(format!(
                    "{here} has {}=\"{}\", which does not match the pattern of {simple_type}",
                    attribute.name(),
                    attribute.value()
                ));
            }
        }

        if !complex.mixed && node.children().any(|child| child.is_text() && !child.text().unwrap().trim().is_empty()) {
            problems.push(format!("{here} holds text, which its type (not mixed) does not allow"));
        }

        let children: Vec<Node> = node.children().filter(Node::is_element).collect();
        let mut declarations = HashMap::new();
        if let Some(particle) = &complex.content {
            self.declarations(particle, &mut declarations);
        }
        let mut undeclared = false;
        for child in &children {
            match declarations.get(child.tag_name().name()).filter(|_| child.tag_name().namespace().is_none()) {
                Some(ty) => self.check(*child, ty, problems),
                None => {
                    undeclared = true;
                    problems.push(format!("{here} holds <{}>, which its type does not declare", name(*child)));
                }
            }
        }
        let fits = match &complex.content {
            Some(particle) => self.ends(particle, &children, 0).contains(&children.len()),
            None => children.is_empty(),
        };
        if !fits && !undeclared {
            let names: Vec<String> = children.iter().map(|child| format!("<{}>", name(*child))).collect();
            problems.push(format!(
                "{here} holds {}, which do not fit its content model (a count or an order it does not allow)",
                names.join(" ")
            ));
        }
    }

    /// Where in `children` a match of `particle` that starts at `start` can end.
    fn ends(&self, particle: &Particle, children: &[Node], start: usize) -> BTreeSet<usize> {
        let mut ends = BTreeSet::new();
        // Where `count` occurrences of the term can end.
        let mut at = BTreeSet::from([start]);
        let mut count = 0;
        loop {
            if count >= particle.min {
                // Each position here was reached with fewer occurrences already, and followed on from: nothing new
                // can come of more.
                if at.is_subset(&ends) {
                    break;
                }
                ends.extend(at.iter().copied());
            }
            if at.is_empty() || particle.max == Some(count) {
                break;
            }
            at = at.iter().flat_map(|&position| self.term_ends(&particle.term, children, position)).collect();
            count += 1;
        }
        ends
    }

    fn term_ends(&self, term: &Term, children: &[Node], start: usize) -> BTreeSet<usize> {
        let element = |name: &str| {
            let matches = children
                .get(start)
                .is_some_and(|child| child.tag_name().name() == name && child.tag_name().namespace().is_none());
            if matches { BTreeSet::from([start + 1]) } else { BTreeSet::new() }
        };
        match term {
            Term::Ref(name) => element(name),
            Term::Local(local) => element(&local.name),
            Term::Sequence(particles) => particles.iter().fold(BTreeSet::from([start]), |at, particle| {
                at.iter().flat_map(|&position| self.ends(particle, children, position)).collect()
            }),
            Term::Choice(particles) => {
                particles.iter().flat_map(|particle| self.ends(particle, children, start)).collect()
            }
        }
    }
}

fn name(node: Node) -> String {
    match node.tag_name().namespace() {
        Some(namespace) => format!("{{{namespace}}}{}", node.tag_name().name()),
        None => node.tag_name().name().to_owned(),
    }
}

/// The element `node` declares, at the top of the schema or in a content model: typed by `type`, or by the
/// complex type it holds.
fn element(node: Node) -> Element {
    let name = required_attribute(node, "name").to_owned();
    let children = schema_children(node);
    let ty = match (node.attribute("type"), children.as_slice()) {
        (Some(value), []) => type_name(node, value).map_or(Type::Text, Type::Named),
        (None, [child]) if child.tag_name().name() == "complexType" => {
            allow_attributes(*child, &["mixed"]);
            Type::Complex(complex(*child))
        }
        (None, []) => unsupported(node, &format!("the element {name} without a type")),
        _ => unsupported(node, &format!("the content of the element {name}")),
    };
    Element { name, ty }
}

/// The complex type `node` declares: an optional sequence or choice, then its attributes.
fn complex(node: Node) -> Complex {
    let mixed = match node.attribute("mixed") {
        None | Some("false" | "0") => false,
        Some("true" | "1") => true,
        Some(other) => unsupported(node, &format!("mixed=\"{other}\"")),
    };
    let mut content = None;
    let mut attributes = Vec::new();
    for child in schema_children(node) {
        match child.tag_name().name() {
            "sequence" | "choice" if content.is_none() && attributes.is_empty() => content = Some(group(child)),
            "attribute" => {
                allow_attributes(child, &["name", "type", "use"]);
                let simple_type = type_name(child, required_attribute(child, "type"));
                let required = match child.attribute("use") {
                    None | Some("optional") => false,
                    Some("required") => true,
                    Some(other) => unsupported(child, &format!("use=\"{other}\"")),
                };
                attributes.push(Attribute {
                    name: required_attribute(child, "name").to_owned(),
                    required,
                    simple_type,
                });
            }
            other => unsupported(child, &format!("<xs:{other}> here")),
        }
    }
    Complex { mixed, content, attributes }
}

/// The `xs:sequence` or `xs:choice` `node`, with its occurrences.
fn group(node: Node) -> Particle {
    allow_attributes(node, &["minOccurs", "maxOccurs"]);
    let (min, max) = occurs(node);
    let mut particles = Vec::new();
    for child in schema_children(node) {
        let particle = match child.tag_name().name() {
            "sequence" | "choice" => group(child),
            "element" => {
                let (min, max) = occurs(child);
                let term = match child.attribute("ref") {
                    Some(reference) => {
                        allow_attributes(child, &["ref", "minOccurs", "maxOccurs"]);
                        if reference.contains(':') {
                            unsupported(child, &format!("ref=\"{reference}\" (a namespace)"));
                        }
                        Term::Ref(reference.to_owned())
                    }
                    None => {
                        allow_attributes(child, &["name", "type", "minOccurs", "maxOccurs"]);
                        Term::Local(Box::new(element(child)))
                    }
                };
                Particle { term, min, max }
            }
            other => unsupported(child, &format!("<xs:{other}> here")),
        };
        particles.push(particle);
    }
    let term = if node.tag_name().name() == "sequence" { Term::Sequence(particles) } else { Term::Choice(particles) };
    Particle { term, min, max }
}

/// The pattern of the simple type `node` declares: a restriction of `xs:string` by one pattern.
fn simple_type(node: Node) -> Regex {
    let [restriction] = schema_children(node)[..] else { unsupported(node, "a simple type other than a restriction") };
    if restriction.tag_name().name() != "restriction" {
        unsupported(restriction, "a simple type other than a restriction");
    }
    allow_attributes(restriction, &["base"]);
    if type_name(restriction, required_attribute(restriction, "base")).is_some() {
        unsupported(restriction, "a restriction of a type other than xs:string");
    }
    let [facet] = schema_children(restriction)[..] else {
        unsupported(restriction, "a restriction other than by one pattern")
    };
    if facet.tag_name().name() != "pattern" {
        unsupported(facet, &format!("the facet <xs:{}>", facet.tag_name().name()));
    }
    allow_attributes(facet, &["value"]);
    pattern(facet, required_attribute(facet, "value"))
}

#[cfg(test)]
mod tests {
    use super::{Schema, schemas, xmllint};
    use std::path::Path;

    /// A JUnit document that junit-10 accepts, using each kind of its elements: the rejections below each change
    /// one thing of it.
    const JUNIT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="run" tests="2" failures="1" errors="0" time="1,234.5">
    <testsuite name="p::leaks" tests="2" failures="1" errors="0" skipped="0" time="0.250">
        <properties>
            <property name="seed" value="7"/>
        </properties>
        <testcase name="grows" classname="p::leaks" time="0.125">
            <system-out>out</system-out>
            <failure type="failed" message="it grew">the figures</failure>
            <rerunFailure type="failed" message="again">its text
                <stackTrace>at leaks.rs:3</stackTrace><system-err>err</system-err>
            </rerunFailure>
            <system-err>err</system-err>
        </testcase>
        <testcase name="clean" time="not a number, and xs:string"/>
        <system-out>the suite's output</system-out>
    </testsuite>
</testsuites>
"#;

    fn junit_10() -> (Schema, std::path::PathBuf) {
        let path = schemas().join("junit-10.xsd");
        (Schema::read(&path), path)
    }

    /// What xmllint says of `xml` against the schema at `schema`, when it is installed.
    fn xmllint_accepts(schema: &Path, xml: &str) -> Option<(bool, String)> {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), xml).unwrap();
        xmllint(schema, file.path())
    }

    /// `document` fits `schema`, and with `from` replaced by `to` does not, for one reason only, that names
    /// `expected`; xmllint, when installed, agrees on both.
    fn rejects(schema: &Schema, path: &Path, document: &str, from: &str, to: &str, expected: &str) {
        assert_eq!(schema.validate(document), Ok(()), "{document}");
        assert_eq!(document.matches(from).count(), 1, "{from} is in the document once");
        let changed = document.replacen(from, to, 1);
        let problems = schema.validate(&changed).expect_err(&changed);
        assert!(problems.len() == 1 && problems[0].contains(expected), "{expected}: {problems:#?}");
        if let Some((accepted, said)) = xmllint_accepts(path, document) {
            assert!(accepted, "xmllint rejects the original: {said}");
        }
        if let Some((accepted, said)) = xmllint_accepts(path, &changed) {
            assert!(!accepted, "xmllint accepts the change too, {problems:?}: {said}");
        }
    }

    fn junit_10_rejects(from: &str, to: &str, expected: &str) {
        let (schema, path) = junit_10();
        rejects(&schema, &path, JUNIT, from, to, expected);
    }

    #[test]
    fn junit_10_accepts_a_document_with_each_of_its_elements() {
        let (schema, path) = junit_10();
        assert_eq!(schema.validate(JUNIT), Ok(()));
        if let Some((accepted, said)) = xmllint_accepts(&path, JUNIT) {
            assert!(accepted, "{said}");
        }
    }

    #[test]
    fn junit_10_rejects_an_attribute_it_does_not_declare() {
        junit_10_rejects(
            r#"<testsuite name="p::leaks""#,
            r#"<testsuite disabled="0" name="p::leaks""#,
            "<testsuite> has the attribute disabled, which the schema does not declare",
        );
        junit_10_rejects(
            r#"<testcase name="clean""#,
            r#"<testcase assertions="1" name="clean""#,
            "<testcase> has the attribute assertions",
        );
    }

    #[test]
    fn junit_10_rejects_a_missing_required_attribute() {
        junit_10_rejects(
            r#"tests="2" failures="1" errors="0" skipped="0""#,
            r#"tests="2" errors="0" skipped="0""#,
            "<testsuite> lacks the required attribute failures",
        );
        junit_10_rejects(
            r#"<rerunFailure type="failed" "#,
            "<rerunFailure ",
            "<rerunFailure> lacks the required attribute type",
        );
    }

    #[test]
    fn junit_10_rejects_a_child_element_it_does_not_declare() {
        junit_10_rejects(
            "<system-err>err</system-err>\n        </testcase>",
            "<system-err>err</system-err><bogus/>\n        </testcase>",
            "<testcase> holds <bogus>, which its type does not declare",
        );
        // Declared in the schema, but not as a child of <testsuites>.
        junit_10_rejects(
            "    </testsuite>\n</testsuites>",
            "    </testsuite>\n<testcase name=\"stray\"/></testsuites>",
            "<testsuites> holds <testcase>, which its type does not declare",
        );
    }

    #[test]
    fn junit_10_rejects_a_child_more_often_or_out_of_the_order_its_sequence_allows() {
        junit_10_rejects(
            "<stackTrace>at leaks.rs:3</stackTrace>",
            "<stackTrace>at leaks.rs:3</stackTrace><stackTrace>again</stackTrace>",
            "<rerunFailure> holds <stackTrace> <stackTrace> <system-err>, which do not fit its content model",
        );
        junit_10_rejects(
            "<stackTrace>at leaks.rs:3</stackTrace><system-err>err</system-err>",
            "<system-err>err</system-err><stackTrace>at leaks.rs:3</stackTrace>",
            "<rerunFailure> holds <system-err> <stackTrace>, which do not fit its content model",
        );
    }

    #[test]
    fn a_child_fewer_times_than_min_occurs_or_more_than_max_occurs_is_rejected() {
        let xsd = r#"<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">
    <xs:element name="pair">
        <xs:complexType>
            <xs:sequence>
                <xs:element name="half" type="xs:string" minOccurs="2" maxOccurs="2"/>
                <xs:choice minOccurs="0" maxOccurs="unbounded">
                    <xs:element name="note" type="xs:string"/>
                    <xs:element name="tag" type="xs:string"/>
                </xs:choice>
            </xs:sequence>
        </xs:complexType>
    </xs:element>
</xs:schema>
"#;
        let schema = Schema::parse(xsd);
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), xsd).unwrap();
        let document = "<pair><half/><half/><note/><tag/><note/></pair>";
        let expected = "<pair> holds <half> <note> <tag> <note>, which do not fit its content model";
        rejects(&schema, file.path(), document, "<half/><half/>", "<half/>", expected);
        let expected = "<pair> holds <half> <half> <half> <note>";
        rejects(&schema, file.path(), document, "<half/><half/>", "<half/><half/><half/>", expected);
    }

    #[test]
    fn junit_10_rejects_a_time_outside_its_surefire_time_pattern() {
        let (schema, path) = junit_10();
        for time in ["0.250s", "-1", "1.2.3", "1234,5", " 0.250"] {
            let suite = r#"skipped="0" time="0.250""#;
            let expected =
                format!("<testsuite> has time=\"{time}\", which does not match the pattern of SUREFIRE_TIME");
            rejects(&schema, &path, JUNIT, suite, &format!(r#"skipped="0" time="{time}""#), &expected);
        }
        // The pattern admits thousands separated by commas; a test case's time is any string.
        let time = r#"time="1,234.5""#;
        rejects(&schema, &path, JUNIT, time, r#"time="1.5 s""#, "<testsuites> has time=\"1.5 s\"");
    }

    #[test]
    fn junit_10_rejects_text_where_its_type_is_not_mixed() {
        junit_10_rejects("        <properties>", "        stray text<properties>", "<testsuite> holds text");
    }

    /// Why `Schema::parse(xsd)` panicked, or `None` if it did not.
    fn parse_panics(xsd: &str) -> Option<String> {
        let panic = std::panic::catch_unwind(|| Schema::parse(xsd)).err()?;
        let message = panic.downcast_ref::<String>().cloned();
        Some(message.unwrap_or_else(|| panic.downcast_ref::<&str>().map_or_else(String::new, |s| (*s).to_owned())))
    }

    #[test]
    fn a_schema_construct_outside_the_subset_panics() {
        let schema =
            |body: &str| format!(r#"<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">{body}</xs:schema>"#);
        let element = |body: &str| {
            schema(&format!(r#"<xs:element name="a"><xs:complexType>{body}</xs:complexType></xs:element>"#))
        };
        let pattern = |pattern: &str| {
            schema(&format!(
                r#"<xs:simpleType name="T">
                    <xs:restriction base="xs:string"><xs:pattern value="{pattern}"/></xs:restriction>
                </xs:simpleType>"#
            ))
        };
        // The control: each construct below is one change from what the validator supports.
        let supported = [
            element(
                r#"<xs:sequence><xs:element ref="a" minOccurs="0"/></xs:sequence>
                <xs:attribute name="n" type="xs:string"/>"#,
            ),
            pattern("[0-9]{2}(,[^.]*)?\\."),
        ];
        for xsd in &supported {
            assert_eq!(parse_panics(xsd), None, "{xsd}");
        }
        let unsupported = [
            element(r#"<xs:sequence><xs:any/></xs:sequence>"#),
            element(r#"<xs:attribute name="n" type="xs:int"/>"#),
            element(r#"<xs:attribute name="n" type="xs:string" fixed="1"/>"#),
            element(r#"<xs:attributeGroup ref="g"/>"#),
            element(r#"<xs:simpleContent/>"#),
            element(r#"<xs:sequence><xs:element ref="a" minOccurs="0"/></xs:sequence><xs:sequence/>"#),
            schema(r#"<xs:group name="g"><xs:sequence/></xs:group>"#),
            schema(r#"<xs:element name="a"/>"#),
            schema(r#"<xs:element name="a" type="xs:string" nillable="true"/>"#),
            schema(r#"<xs:element name="a"><xs:annotation/></xs:element>"#),
            r#"<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" targetNamespace="urn:x"/>"#.to_owned(),
            pattern("[a-z-[aeiou]]"),
            pattern("\\i\\c*"),
            pattern("^[0-9]$"),
            pattern("a.b"),
            pattern("(?i)a"),
        ];
        for xsd in &unsupported {
            let message = parse_panics(xsd);
            assert!(
                message.as_ref().is_some_and(|message| message.starts_with("unsupported schema construct")),
                "{xsd}: {message:?}"
            );
        }
    }
}
