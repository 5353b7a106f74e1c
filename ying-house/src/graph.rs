//! The circles of a crate's file graph (an arrow from each file to each file it imports): its strongly connected
//! components of more than one file, found with Tarjan's algorithm, each once.

/// The circles of the graph of `files` files (numbered from 0) whose arrows are `arrows` (from, to): each the list
/// of its files in ascending order, the circles ordered by their first file.
pub fn circles(files: usize, arrows: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let mut next = vec![Vec::new(); files];
    for &(from, to) in arrows {
        next[from].push(to);
    }
    let mut search = Search {
        next: &next,
        index: vec![None; files],
        low: vec![0; files],
        stack: Vec::new(),
        on_stack: vec![false; files],
        counter: 0,
        found: Vec::new(),
    };
    for file in 0..files {
        if search.index[file].is_none() {
            search.visit(file);
        }
    }
    let mut found = search.found;
    found.sort();
    found
}

/// Tarjan's search: each file's visit order and the lowest one it reaches back to.
struct Search<'a> {
    /// The files each file has arrows to.
    next: &'a [Vec<usize>],
    /// When each file was first visited.
    index: Vec<Option<usize>>,
    /// The earliest visit reached from each file, through files still on the stack.
    low: Vec<usize>,
    /// The files visited whose component is not known yet.
    stack: Vec<usize>,
    /// Whether each file is on the stack.
    on_stack: Vec<bool>,
    /// The next visit's number.
    counter: usize,
    /// The circles found.
    found: Vec<Vec<usize>>,
}

impl Search<'_> {
    /// Visits `file` and what it reaches; when `file` is the first of its component, takes the component off the
    /// stack and keeps it if it is a circle.
    fn visit(&mut self, file: usize) {
        let index = self.counter;
        self.counter += 1;
        self.index[file] = Some(index);
        self.low[file] = index;
        self.stack.push(file);
        self.on_stack[file] = true;
        let next = self.next;
        for &to in &next[file] {
            match self.index[to] {
                None => {
                    self.visit(to);
                    self.low[file] = self.low[file].min(self.low[to]);
                }
                Some(reached) if self.on_stack[to] => self.low[file] = self.low[file].min(reached),
                Some(_) => {}
            }
        }
        if self.low[file] == index {
            let mut component = Vec::new();
            while let Some(member) = self.stack.pop() {
                self.on_stack[member] = false;
                component.push(member);
                if member == file {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort_unstable();
                self.found.push(component);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::circles;

    #[test]
    fn circles_are_the_components_of_more_than_one_file() {
        // 0 -> 1 -> 2 -> 1, 3 <-> 4, 4 -> 5, 5 -> 6 -> 5, and 7 alone.
        let arrows = [(0, 1), (1, 2), (2, 1), (3, 4), (4, 3), (4, 5), (5, 6), (6, 5), (0, 7)];
        assert_eq!(circles(8, &arrows), [vec![1, 2], vec![3, 4], vec![5, 6]]);
        // A circle of three found once.
        assert_eq!(circles(3, &[(2, 0), (0, 1), (1, 2), (1, 0)]), [vec![0, 1, 2]]);
        assert!(circles(3, &[(0, 1), (1, 2), (0, 2)]).is_empty());
    }
}
